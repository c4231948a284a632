// graphile-worker behind the small interface scenarios.mjs drives (see peer interface there).
// Jobs live in graphile_worker._private_jobs and are DELETED when completed, so "not done" is
// the number of rows left in that table.
import { loadPackage, loadPg, pgConfig } from './common.mjs';

const TASK = 'bench';
const SCHEMA = 'graphile_worker';

// Mandated worker settings: 4 concurrent jobs, a local queue of 100 jobs fetched (and locked) per
// query, completions (and failures) batched with no added delay.
export const WORKER_SETTINGS = {
  concurrency: 4,
  preset: { worker: { localQueue: { size: 100 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
};

export async function createPeer(args) {
  const { module: gw, version } = await loadPackage('graphile-worker');
  const pg = await loadPg();
  // Errors and warnings to stderr; info (one line per completed job) and debug dropped.
  const logger = new gw.Logger(() => (level, message) => {
    if (level === 'error' || level === 'warning') console.error(`graphile-worker ${level}: ${message}`);
  });
  const pool = (max) => {
    const p = new pg.Pool(pgConfig(args, { max }));
    // Both handlers present, so graphile-worker does not install (and warn about) its own.
    p.on('error', (err) => console.error(`graphile-worker pool: ${err.message}`));
    p.on('connect', (c) => c.on('error', (err) => console.error(`graphile-worker connection: ${err.message}`)));
    return p;
  };
  let worker = null;

  return {
    name: 'graphile-worker',
    version,
    wakeup: 'notify',
    jobTables: [`${SCHEMA}._private_jobs`],
    notDoneSql: `select count(*)::int as n from ${SCHEMA}._private_jobs`,

    async install() {
      const p = pool(2);
      try {
        const utils = await gw.makeWorkerUtils({ pgPool: p, logger });
        await utils.migrate();
        await utils.release();
      } finally {
        await p.end();
      }
    },

    // A producer on a pool of `connections`: add(payload) adds one job, addMany(payloads) one
    // addJobs call (one statement) for all of them.
    async producer(connections) {
      const p = pool(connections);
      const utils = await gw.makeWorkerUtils({ pgPool: p, logger });
      const spec = (payload) => ({ identifier: TASK, payload });
      return {
        add: (payload) => utils.addJob(TASK, payload),
        addMany: (payloads) => utils.addJobs(payloads.map(spec)),
        async close() {
          await utils.release();
          await p.end();
        },
      };
    },

    // Starts the worker; onJob(payload) is called as the (otherwise no-op) handler starts.
    async startWorker(onJob) {
      if (worker) throw new Error('worker already running');
      const p = pool(WORKER_SETTINGS.concurrency + 6); // LISTEN + fetch + completions + headroom
      const runner = await gw.run({
        pgPool: p,
        logger,
        noHandleSignals: true,
        parsedCronItems: [],
        taskList: { [TASK]: async (payload) => { onJob(payload); } },
        ...WORKER_SETTINGS,
      });
      worker = { runner, pool: p };
    },

    // Graceful stop: running jobs finish and the batched completions are written.
    async stopWorker() {
      if (!worker) return;
      const { runner, pool: p } = worker;
      worker = null;
      await runner.stop();
      await runner.promise;
      await p.end();
    },
  };
}
