// Shared helpers of run.mjs: command line, package loading from the install directory, clocks,
// statistics, result lines, plain pg connections.
import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { homedir, userInfo } from 'node:os';
import { pathToFileURL } from 'node:url';

export const PAYLOAD = Object.freeze({ to: 'user@example.com', n: 1 });

export const log = (...args) => console.error('peers:', ...args);

// --- packages --------------------------------------------------------------------------------
// The packages live in PGQUEUE_PEERS_DIR (default ~/.cache/pgqueue-peers, where ./install puts
// them), never in the repository, so they are resolved from there explicitly: a require rooted at
// that directory's package.json finds the entry file, which is then loaded with import(). This
// works whatever the current directory and NODE_PATH are, for ES modules and CommonJS alike.
export const peersDir = process.env.PGQUEUE_PEERS_DIR || join(homedir(), '.cache', 'pgqueue-peers');
const requireFromPeers = createRequire(join(peersDir, 'package.json'));

export async function loadPackage(name) {
  let entry;
  try {
    entry = requireFromPeers.resolve(name);
  } catch (err) {
    throw new Error(`${name} is not installed in ${peersDir} (run benchmarks/peers/install): ${err.message}`);
  }
  return { module: await import(pathToFileURL(entry).href), version: packageVersion(name, entry) };
}

// The version in the package's own package.json (not always exported, so found by walking up).
function packageVersion(name, entry) {
  for (let d = dirname(entry); d !== dirname(d); d = dirname(d)) {
    const f = join(d, 'package.json');
    if (existsSync(f)) {
      const pkg = JSON.parse(readFileSync(f, 'utf8'));
      if (pkg.name === name) return pkg.version;
    }
  }
  throw new Error(`no package.json of ${name} above ${entry}`);
}

export async function loadPg() {
  const { module } = await loadPackage('pg');
  return module.default ?? module;
}

// --- command line ----------------------------------------------------------------------------
const SPEC = {
  peer: String, scenario: String, host: String, port: Number, user: String, database: String,
  password: String, jobs: Number, seconds: Number, samples: Number, rate: Number, minutes: Number,
  'window-seconds': Number,
};
const DEFAULTS = {
  port: 5432, jobs: 50000, seconds: 5, samples: 1200, minutes: 10, 'window-seconds': 20,
};
const DEFAULT_RATE = { latency: 200, pinned: 5000 }; // jobs/s
export const PEERS = ['graphile-worker', 'pg-boss'];
export const SCENARIOS = ['drain', 'enqueue1', 'enqueue_batch', 'latency', 'pinned'];

export const USAGE = `usage: run.mjs --peer ${PEERS.join('|')} --scenario ${SCENARIOS.join('|')}
  --database D [--host H] [--port P] [--user U] [--password X] [--jobs N] [--seconds S]
  [--samples N] [--rate R] [--minutes M] [--window-seconds W]
  (host: a name, an address or a unix-socket directory; defaults as libpq's: $PGHOST or
  /var/run/postgresql, port 5432, $PGUSER or the OS user)`;

export class UsageError extends Error {}

export function parseArgs(argv) {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(USAGE + '\n');
    process.exit(0);
  }
  const out = { ...DEFAULTS };
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m || !(m[1] in SPEC)) throw new UsageError(`unknown argument ${argv[i]}\n${USAGE}`);
    const raw = m[2] ?? argv[++i];
    if (raw === undefined) throw new UsageError(`--${m[1]} needs a value`);
    const v = SPEC[m[1]](raw);
    if (SPEC[m[1]] === Number && !(Number.isFinite(v) && v > 0)) throw new UsageError(`--${m[1]} ${raw}: not a positive number`);
    out[m[1]] = v;
  }
  // Like libpq when the conninfo names no host or user (node-postgres would use localhost).
  out.host ??= process.env.PGHOST || '/var/run/postgresql';
  out.user ??= process.env.PGUSER || userInfo().username;
  for (const k of ['peer', 'scenario', 'database']) {
    if (!out[k]) throw new UsageError(`--${k} is required\n${USAGE}`);
  }
  if (!PEERS.includes(out.peer)) throw new UsageError(`--peer ${out.peer}: one of ${PEERS.join(', ')}`);
  if (!SCENARIOS.includes(out.scenario)) throw new UsageError(`--scenario ${out.scenario}: one of ${SCENARIOS.join(', ')}`);
  for (const k of ['jobs', 'samples']) out[k] = Math.round(out[k]);
  out.rate ??= DEFAULT_RATE[out.scenario];
  out.windowSeconds = out['window-seconds'];
  return out;
}

// node-postgres connection settings (a host starting with '/' is a unix-socket directory).
export function pgConfig(args, extra = {}) {
  const c = { host: args.host, port: args.port, user: args.user, database: args.database, ...extra };
  if (args.password !== undefined) c.password = args.password;
  return c;
}

// --- time ------------------------------------------------------------------------------------
export const nowNs = () => process.hrtime.bigint();
export const msBetween = (a, b) => Number(b - a) / 1e6;
export const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

// Sleeps until the monotonic time `atNs` (a schedule, so lateness does not accumulate).
export async function sleepUntil(atNs) {
  const ms = Number(atNs - nowNs()) / 1e6;
  if (ms > 0) await sleep(ms);
}

// A sleep until `atNs` that can be cancelled (so it does not keep the process alive).
export function timerUntil(atNs) {
  let id;
  const promise = new Promise((r) => { id = setTimeout(r, Math.max(0, Number(atNs - nowNs()) / 1e6)); });
  return { promise, cancel: () => clearTimeout(id) };
}

// --- statistics and output -------------------------------------------------------------------
// Nearest-rank percentile of an ascending array.
export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

export const fmt = (x, digits = 3) => (Number.isFinite(x) ? x.toFixed(digits) : 'nan');

// One output line: words, then key=value pairs (values must not contain spaces).
export function emit(head, fields) {
  const parts = [head];
  for (const [k, v] of Object.entries(fields)) {
    const s = String(v);
    if (/\s/.test(s) || s === '') throw new Error(`output value of ${k} is empty or has spaces: '${s}'`);
    parts.push(`${k}=${s}`);
  }
  process.stdout.write(parts.join(' ') + '\n');
}
