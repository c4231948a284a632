// pg-boss behind the small interface scenarios.mjs drives (see peer interface there).
// Jobs live in pgboss.job, a table partitioned by queue name (a queue created without
// `partition: true` lands in the default partition pgboss.job_common); completed jobs stay
// there with state 'completed' (deleted by maintenance after deleteAfterSeconds, 7 days).
import { loadPackage, pgConfig } from './common.mjs';

const QUEUE = 'bench';
const SCHEMA = 'pgboss';

// Mandated worker settings: 100 jobs per fetch, 4 workers (localConcurrency: one polling loop
// each), the smallest polling interval pg-boss accepts (0.5 s), and no wait between fetches while
// they come back full (burstWhenBatchFull); workers are also woken by LISTEN/NOTIFY (the queue is
// created with notify: true and the worker's instance has useListenNotify: true).
export const WORK_OPTIONS = {
  batchSize: 100,
  localConcurrency: 4,
  pollingIntervalSeconds: 0.5,
  burstWhenBatchFull: true,
};
export const QUEUE_OPTIONS = { notify: true };

export async function createPeer(args) {
  const { module: pb, version } = await loadPackage('pg-boss');
  const PgBoss = pb.PgBoss ?? pb.default;
  let listenUnavailable = false;

  // One PgBoss instance with its own pool. Producers do no maintenance and no cron (supervise,
  // schedule off); the worker's instance keeps pg-boss's defaults apart from cron and LISTEN.
  async function instance(options) {
    const boss = new PgBoss({ ...pgConfig(args), schema: SCHEMA, schedule: false, ...options });
    boss.on('error', (err) => console.error(`pg-boss error: ${err?.message ?? err}`));
    boss.on('warning', (w) => {
      if (w?.data?.type === 'listen_notify_unavailable') listenUnavailable = true;
      console.error(`pg-boss warning: ${w?.message ?? JSON.stringify(w)}`);
    });
    await boss.start();
    return boss;
  }
  const producerOptions = (max) => ({ max, supervise: false, registerInstance: false });
  let worker = null;

  return {
    name: 'pg-boss',
    version,
    get wakeup() {
      return listenUnavailable ? `polling_${WORK_OPTIONS.pollingIntervalSeconds}s` : 'notify';
    },
    jobTables: [`${SCHEMA}.job`],
    notDoneSql: `select count(*)::int as n from ${SCHEMA}.job where name = '${QUEUE}' and state <> 'completed'`,

    async install() {
      const boss = await instance(producerOptions(2)); // start() installs the schema
      try {
        await boss.createQueue(QUEUE, QUEUE_OPTIONS);
      } finally {
        await boss.stop();
      }
    },

    // A producer on a pool of `connections`: add(payload) is one send(), addMany(payloads) one
    // insert() (one statement) of all of them.
    async producer(connections) {
      const boss = await instance(producerOptions(connections));
      return {
        add: (payload) => boss.send(QUEUE, payload),
        addMany: (payloads) => boss.insert(QUEUE, payloads.map((data) => ({ data }))),
        close: () => boss.stop(),
      };
    },

    // Starts the worker; onJob(payload) is called for each job of a batch as the (otherwise
    // no-op) batch handler starts.
    async startWorker(onJob) {
      if (worker) throw new Error('worker already running');
      const boss = await instance({ max: 10, useListenNotify: true });
      await boss.work(QUEUE, WORK_OPTIONS, async (jobs) => {
        for (const job of jobs) onJob(job.data);
      });
      worker = boss;
    },

    // Graceful stop: the batches in hand finish and are completed; the pool is closed.
    async stopWorker() {
      if (!worker) return;
      const boss = worker;
      worker = null;
      await boss.stop({ graceful: true });
    },
  };
}
