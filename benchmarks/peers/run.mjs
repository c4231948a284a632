// Runs one benchmark scenario against one peer job queue (graphile-worker or pg-boss) on a fresh,
// empty PostgreSQL database, for pgqueue-bench to compare with pgqueue.
//
//   NODE=$(benchmarks/peers/install | tail -n1)
//   $NODE benchmarks/peers/run.mjs --peer graphile-worker|pg-boss \
//     --scenario drain|enqueue1|enqueue_batch|latency|pinned --host H --port P --user U --database D
//     [--password X] [--jobs N] [--seconds S] [--samples N] [--rate R] [--minutes M]
//     [--window-seconds W]
//
// The packages are loaded from PGQUEUE_PEERS_DIR (default ~/.cache/pgqueue-peers), where install
// put them: common.mjs resolves them with a require rooted at that directory's package.json and
// import()s the resolved file, so neither NODE_PATH nor the current directory matters. Set the
// same PGQUEUE_PEERS_DIR for install and run.mjs.
//
// stdout carries only result lines: `result peer=.. version=.. scenario=.. key=value...` (and
// `window n=..` lines in pinned); progress and diagnostics go to stderr. Exit status 0 on
// success; on failure a message on stderr and 1 (2: bad command line). See README.md for the fields.
import { UsageError, emit, loadPg, log, parseArgs, pgConfig } from './common.mjs';
import * as scenarios from './scenarios.mjs';

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const { createPeer } = await import(args.peer === 'graphile-worker' ? './graphile.mjs' : './pgboss.mjs');
  const peer = await createPeer(args);
  const pg = await loadPg();
  const client = async () => {
    const c = new pg.Client(pgConfig(args, { application_name: 'peers-admin' }));
    c.on('error', (err) => log(`admin connection: ${err.message}`));
    await c.connect();
    return c;
  };
  const admin = await client();
  const pin = args.scenario === 'pinned' ? await client() : null;
  try {
    log(`${peer.name} ${peer.version}, node ${process.version}: ${args.scenario} on ${args.host}:${args.port}/${args.database}`);
    await peer.install();
    const fields = await scenarios[args.scenario](peer, args, admin, pin);
    emit('result', { peer: peer.name, version: peer.version, scenario: args.scenario, ...fields });
  } finally {
    await peer.stopWorker().catch((err) => log(`stopping the worker: ${err.message}`));
    if (pin) await pin.end().catch(() => {});
    await admin.end().catch(() => {});
  }
}

// A safety net: once main() has returned, nothing should keep the process alive for long.
main().then(
  () => { setTimeout(() => { log('still running 10 s after the result; exiting'); process.exit(0); }, 10000).unref(); },
  (err) => {
    console.error(`peers: ${err instanceof UsageError ? err.message : (err?.stack ?? err)}`);
    process.exit(err instanceof UsageError ? 2 : 1);
  },
);
