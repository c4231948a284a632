// The five scenarios, written against a peer object (graphile.mjs, pgboss.mjs):
//   name, version, wakeup            strings for the result lines
//   install()                        installs the peer's schema in the (empty) database
//   producer(connections)            -> { add(payload), addMany(payloads), close() }
//   startWorker(onJob), stopWorker() the worker with the mandated settings; onJob(payload) runs
//                                    as a job's handler starts; stopWorker flushes completions
//   notDoneSql                       SQL counting the jobs not completed, as `n`
//   jobTables                        the peer's job table(s), for sizes and dead tuples
// Each returns the key=value fields of its result line (after peer, version and scenario).
import { PAYLOAD, emit, fmt, log, msBetween, nowNs, percentile, sleep, sleepUntil, timerUntil } from './common.mjs';

const PREFILL_BATCH = 5000;
const sNs = (s) => BigInt(Math.round(s * 1e9));

async function notDone(peer, admin) {
  return (await admin.query(peer.notDoneSql)).rows[0].n;
}

// --- drain -----------------------------------------------------------------------------------
export async function drain(peer, args, admin) {
  const n = args.jobs;
  const prod = await peer.producer(2);
  try {
    const t = nowNs();
    for (let added = 0; added < n; added += PREFILL_BATCH) {
      await prod.addMany(Array(Math.min(PREFILL_BATCH, n - added)).fill(PAYLOAD));
    }
    log(`prefilled ${n} jobs in ${fmt(msBetween(t, nowNs()) / 1000, 2)} s`);
  } finally {
    await prod.close();
  }
  if ((await notDone(peer, admin)) !== n) throw new Error('prefill: job count in the table is not --jobs');

  let handled = 0;
  let allHandled;
  const handledAll = new Promise((resolve) => { allHandled = resolve; });
  const t0 = nowNs();
  const deadline = t0 + sNs(args.seconds);
  await peer.startWorker(() => { if (++handled === n) allHandled(); });
  const workerStartMs = msBetween(t0, nowNs());
  let left, t1;
  try {
    const timer = timerUntil(deadline);
    await Promise.race([handledAll, timer.promise]);
    timer.cancel();
    // Every handler has run (or time is up): the count that matters is the database's, so poll it
    // until the last (batched) completions are committed, or time is up.
    for (;;) {
      left = await notDone(peer, admin);
      t1 = nowNs();
      if (left === 0 || t1 >= deadline) break;
      if (handled < n) await sleepUntil(deadline); else await sleep(1);
    }
  } finally {
    await peer.stopWorker();
  }
  const seconds = msBetween(t0, t1) / 1000;
  log(`worker started in ${fmt(workerStartMs, 1)} ms (inside the timed span); handler calls ${handled}, done in the database ${n - left} at the clock stop, ${n - await notDone(peer, admin)} after the worker stopped`);
  return { jobs: n - left, seconds: fmt(seconds), jobs_per_s: fmt((n - left) / seconds, 1), finished: left === 0 ? 1 : 0,
    worker_start_ms: fmt(workerStartMs, 1) };
}

// --- enqueue ---------------------------------------------------------------------------------
// `callers` loops, each awaiting add(one job) (or addMany(batch)) until `seconds` have passed.
async function enqueueLoop(peer, args, callers, batch) {
  const prod = await peer.producer(callers);
  try {
    const call = batch === 1 ? () => prod.add(PAYLOAD) : () => prod.addMany(Array(batch).fill(PAYLOAD));
    await Promise.all(Array.from({ length: callers }, call)); // warm-up: connections, caches
    const lat = [];
    const t0 = nowNs();
    const deadline = t0 + sNs(args.seconds);
    const loop = async () => {
      while (nowNs() < deadline) {
        const s = nowNs();
        await call();
        lat.push(msBetween(s, nowNs()));
      }
    };
    await Promise.all(Array.from({ length: callers }, loop));
    const seconds = msBetween(t0, nowNs()) / 1000;
    lat.sort((a, b) => a - b);
    return { calls: lat.length, seconds, lat };
  } finally {
    await prod.close();
  }
}

export async function enqueue1(peer, args) {
  const { calls, seconds, lat } = await enqueueLoop(peer, args, 8, 1);
  return { callers: 8, jobs: calls, seconds: fmt(seconds), jobs_per_s: fmt(calls / seconds, 1),
    p50_ms: fmt(percentile(lat, 50)), p99_ms: fmt(percentile(lat, 99)) };
}

export async function enqueue_batch(peer, args) {
  const { calls, seconds, lat } = await enqueueLoop(peer, args, 1, 1000);
  return { batch: 1000, calls, jobs: calls * 1000, seconds: fmt(seconds),
    jobs_per_s: fmt((calls * 1000) / seconds, 1), p50_ms: fmt(percentile(lat, 50)) };
}

// --- latency ---------------------------------------------------------------------------------
const WARMUP = 20;

export async function latency(peer, args) {
  const total = WARMUP + args.samples;
  const started = new Array(total); // handler start (ns) per job index
  let seen = 0;
  let allSeen;
  const seenAll = new Promise((resolve) => { allSeen = resolve; });
  const returned = new Array(total);
  const called = new Array(total);
  await peer.startWorker((p) => {
    const t = nowNs();
    if (p.i === undefined || started[p.i] !== undefined) return;
    started[p.i] = t;
    if (++seen === total) allSeen();
  });
  const prod = await peer.producer(1);
  try {
    const t0 = nowNs();
    const stepNs = 1e9 / args.rate;
    for (let i = 0; i < total; i++) {
      await sleepUntil(t0 + BigInt(Math.round(i * stepNs)));
      const t = nowNs();
      called[i] = t;
      await prod.add({ ...PAYLOAD, i, t: t.toString() });
      returned[i] = nowNs();
    }
    const timer = timerUntil(nowNs() + 30_000_000_000n);
    const timeout = timer.promise.then(() => { throw new Error(`latency: ${total - seen} of ${total} jobs not started 30 s after the last enqueue`); });
    await Promise.race([seenAll, timeout]);
    timer.cancel();
  } finally {
    await prod.close();
    await peer.stopWorker();
  }
  const fromCall = [], fromReturn = [];
  for (let i = WARMUP; i < total; i++) {
    fromCall.push(msBetween(called[i], started[i]));
    fromReturn.push(msBetween(returned[i], started[i]));
  }
  const out = { wakeup: peer.wakeup, samples: args.samples, rate: args.rate };
  for (const [name, v] of [['from_call', fromCall], ['from_return', fromReturn]]) {
    v.sort((a, b) => a - b);
    for (const p of [50, 90, 99]) out[`${name}_p${p}_ms`] = fmt(percentile(v, p));
    out[`${name}_max_ms`] = fmt(v[v.length - 1]);
  }
  return out;
}

// --- pinned ----------------------------------------------------------------------------------
const PINNED_BATCH = 100;

// Sizes of the peer's job table(s) (every leaf partition): heap with TOAST, indexes, dead tuples.
async function tableStats(peer, admin) {
  const { rows } = await admin.query(
    `with leaves as (
       select coalesce(t.relid, j.rel) as relid
         from unnest($1::regclass[]) as j(rel)
         left join lateral (select relid from pg_partition_tree(j.rel) where isleaf) t on true)
     select coalesce(sum(pg_table_size(l.relid)), 0)::float8 as table_bytes,
            coalesce(sum(pg_indexes_size(l.relid)), 0)::float8 as index_bytes,
            coalesce(sum(s.n_dead_tup), 0)::float8 as dead
       from leaves l left join pg_stat_user_tables s on s.relid = l.relid`, [peer.jobTables]);
  const r = rows[0];
  return { table_mb: fmt(r.table_bytes / 1048576, 1), index_mb: fmt(r.index_bytes / 1048576, 1), dead_tuples: r.dead };
}

export async function pinned(peer, args, admin, pin) {
  await pin.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
  await pin.query('SELECT 1');
  const held = await pin.query('SELECT backend_xmin IS NOT NULL AS held FROM pg_stat_activity WHERE pid = pg_backend_pid()');
  if (!held.rows[0]?.held) throw new Error('pinned: the REPEATABLE READ transaction holds no xmin');
  let handled = 0;
  let added = 0;
  await peer.startWorker(() => { handled++; });
  const prod = await peer.producer(1);
  const windows = [];
  try {
    const t0 = nowNs();
    const end = t0 + sNs(args.minutes * 60);
    const stepNs = (PINNED_BATCH / args.rate) * 1e9;
    let stop = false;
    const producer = (async () => {
      for (let k = 0; !stop; k++) {
        const at = t0 + BigInt(Math.round(k * stepNs));
        if (at >= end) break;
        await sleepUntil(at);
        await prod.addMany(Array(PINNED_BATCH).fill(PAYLOAD));
        added += PINNED_BATCH;
      }
    })();
    producer.catch(() => { stop = true; });
    const wNs = sNs(args.windowSeconds);
    let prev = { t: t0, handled: 0, added: 0 };
    for (let i = 1; ; i++) {
      const at = t0 + BigInt(i) * wNs;
      const last = at >= end;
      await Promise.race([sleepUntil(last ? end : at), producer.then(() => new Promise(() => {}))]);
      const cur = { t: nowNs(), handled, added };
      const seconds = msBetween(prev.t, cur.t) / 1000;
      const w = { n: i, seconds: fmt(seconds), done_per_s: fmt((cur.handled - prev.handled) / seconds, 1),
        backlog: cur.added - cur.handled, added_per_s: fmt((cur.added - prev.added) / seconds, 1) };
      windows.push(w);
      emit('window', w);
      prev = cur;
      if (last) break;
    }
    stop = true;
    await producer;
  } finally {
    await prod.close();
  }
  // Sizes while the horizon is still held; then the pin goes before the worker stops: pg-boss's
  // maintenance (REINDEX CONCURRENTLY) waits for the pinning transaction, and its stop for it.
  let sizes;
  try {
    sizes = await tableStats(peer, admin);
  } finally {
    await pin.query('ROLLBACK');
    await peer.stopWorker();
  }
  const dbDone = added - await notDone(peer, admin);
  return { minutes: args.minutes, rate: args.rate, added, done: handled, db_done: dbDone,
    start_per_s: windows[0].done_per_s, end_per_s: windows[windows.length - 1].done_per_s, ...sizes };
}
