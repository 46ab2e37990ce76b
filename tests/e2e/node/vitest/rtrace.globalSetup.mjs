// Vitest globalSetup: one `rtrace serve` for the whole test run, in place of a hand-written mock realtime server.
// The tests get its URL with `inject('rtraceUrl')`; at the end of the run rtrace analyzes what it recorded and the
// run fails when a finding at `error` (or --fail-on LEVEL) was recorded. RTRACE: the rtrace command (default
// `rtrace`); RTRACE_SERVE_ARGS: more options of `rtrace serve` (faults, a --script, --record PATH).
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

export default async function setup(project) {
  const extra = (process.env.RTRACE_SERVE_ARGS ?? '').split(' ').filter(Boolean);
  const args = ['serve', '--latency', '50ms', '--exit-with-findings', '--live', ...extra];
  const server = spawn(process.env.RTRACE ?? 'rtrace', args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  const url = await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.once('exit', (code) => reject(new Error(`rtrace serve exited (${code}) before it listened`)));
    createInterface({ input: server.stdout }).on('line', (line) => {
      output += `${line}\n`;
      const listening = line.match(/^rtrace serve: listening on (ws:\S+)/);
      if (listening) resolve(listening[1]);
    });
  });
  project.provide('rtraceUrl', url);

  return async () => {
    const exited = new Promise((resolve) => server.once('exit', resolve));
    server.kill('SIGTERM'); // rtrace writes its report, then exits 1 when findings were recorded
    const code = await exited;
    if (code !== 0) {
      process.exitCode = 1; // Vitest reports an error thrown here but would still exit 0
      throw new Error(`rtrace found problems in this run's realtime sessions:\n${output}`);
    }
  };
}
