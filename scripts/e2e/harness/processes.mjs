// Processes: every one started here is remembered by PID and stopped on exit, whatever happens;
// and the waits every step uses.
import * as net from 'node:net';

export const children = new Set();

function killTree(child, signal) {
  try {
    process.kill(-child.pid, signal); // detached: the child leads its own process group
  } catch {
    try {
      process.kill(child.pid, signal);
    } catch {
      // already gone
    }
  }
}

export async function stopChild(child, graceMs = 5000) {
  if (!children.has(child)) {
    return;
  }
  children.delete(child);
  if (child.exitCode !== null || child.signalCode !== null) {
    killTree(child, 'SIGKILL'); // leftovers in its group
    return;
  }
  const exited = new Promise((resolve) => child.once('exit', resolve));
  killTree(child, 'SIGTERM');
  const timer = setTimeout(() => killTree(child, 'SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
  killTree(child, 'SIGKILL');
}

export function killAllNow() {
  for (const child of children) {
    killTree(child, 'SIGKILL');
  }
  children.clear();
}

process.on('exit', killAllNow);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    console.error(`e2e: ${signal}, stopping`);
    killAllNow();
    process.exit(130);
  });
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms / 1000}s: ${what}`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

export async function waitForHttp(url, ms) {
  const deadline = Date.now() + ms;
  let lastError;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(2000) });
      if (response.ok) {
        return;
      }
      lastError = new Error(`HTTP ${response.status}`);
    } catch (err) {
      lastError = err;
    }
    await sleep(250);
  }
  throw new Error(`${url} did not answer in ${ms / 1000}s: ${lastError}`);
}
