// What the Node client drivers share (agentsjs_scenario.mjs, agents_realtime_scenario.mjs): arguments, the test's
// own tool, the summary line, stdout kept for it, and the exit codes. The same run and the same summary
// (`rtrace.scenario/1`) as the Python drivers' ../scenario_common.py, whose docstring describes both.
//
// Node standard library only: the client packages are imported by each driver, from ./node_modules (made by
// `make e2e-envs` from ./package-lock.json).

import fs from 'node:fs';
import { parseArgs } from 'node:util';

export const SCHEMA = 'rtrace.scenario/1';
// Names the order: `rtrace serve` calls the session's tool whose name words the user text mentions.
export const DEFAULT_USER_TEXT = 'Where is my order A-1234?';
export const TOOL_DESCRIPTION = 'Look up an order by its number: status and expected delivery date.';
export const INSTRUCTIONS = 'You help with orders. Use the order tool to look orders up.';
export const ORDER_SCHEMA = {
  type: 'object',
  properties: { order_id: { type: 'string', description: 'The order number, e.g. A-1234.' } },
  required: ['order_id'],
  additionalProperties: false,
};
// After the end condition, how long to keep listening for trailing events before closing (as SETTLE_SECONDS).
const SETTLE_MS = 500;
export const EXIT_DONE = 0;
export const EXIT_BAD_ARGS = 2;
export const EXIT_TIMEOUT = 3;
export const EXIT_FAILED = 4;
const STATUS = { [EXIT_DONE]: 'done', [EXIT_TIMEOUT]: 'timeout', [EXIT_FAILED]: 'failed' };

// The command line: --url (its meaning is the driver's, `urlHelp`), --tool-name, --timeout, --modality,
// --tool-seconds, --user-text, --model, --verbose, plus the driver's `extra` options (parseArgs specs).
export function parseOptions(name, urlHelp, extra = {}) {
  const usage = (message) => {
    process.stderr.write(`${name}: ${message}\n`);
    process.exit(EXIT_BAD_ARGS);
  };
  let opts;
  try {
    opts = parseArgs({
      options: {
        url: { type: 'string' },
        'tool-name': { type: 'string', default: 'lookup_order' },
        timeout: { type: 'string', default: '20' },
        modality: { type: 'string', default: 'text' },
        'tool-seconds': { type: 'string', default: '0.3' },
        'user-text': { type: 'string', default: DEFAULT_USER_TEXT },
        model: { type: 'string', default: 'gpt-realtime' },
        verbose: { type: 'boolean', default: false },
        ...extra,
      },
      strict: true,
    }).values;
  } catch (err) {
    usage(err.message);
  }
  if (!opts.url) usage(`--url is required: ${urlHelp}`);
  if (!['text', 'audio'].includes(opts.modality)) usage('--modality must be text or audio');
  for (const key of ['timeout', 'tool-seconds', ...Object.keys(extra).filter((k) => extra[k].type === 'string')]) {
    const value = Number(opts[key]);
    if (!(value >= 0)) usage(`--${key} must be a number`);
    opts[key] = value;
  }
  return opts;
}

// One run: what it saw (`summary`), and its end (`finish`). stdout is kept for the summary line: the clients'
// stray writes (agents-js logs through pino to stdout) go to stderr, their JSON warnings into `client_warnings`.
export class Run {
  constructor(client, version, opts) {
    this.opts = opts;
    this.started = Date.now();
    this.finished = false;
    // Called once at the end, before the line is written (e.g. to close the session); capped at 1 s.
    this.beforeExit = async () => {};
    this.outputCallIds = new Set();
    this.ackedCallIds = new Set();
    this.summary = {
      schema: SCHEMA,
      client,
      client_version: version,
      tool_name: opts['tool-name'],
      modality: opts.modality,
      status: null,
      ok: false,
      finish_reason: null,
      answers: [],
      final_answer: null,
      tool_calls: [],
      tool_outputs_sent: 0,
      output_acked: false,
      audio_bytes: 0,
      audio_chunks: 0,
      reconnected: 0,
      connections: 0,
      close_codes: [],
      server_errors: [],
      errors: [],
      client_warnings: [],
      marks: {},
      elapsed: 0,
    };
    this.#protectStdout();
    process.on('unhandledRejection', (reason) => this.error('unhandledRejection', reason));
    process.on('uncaughtException', (err) => {
      this.error('uncaughtException', err);
      this.finish(EXIT_FAILED, 'the client threw');
    });
    setTimeout(() => this.finish(EXIT_TIMEOUT, 'timeout'), opts.timeout * 1000);
  }

  #protectStdout() {
    this.writeLine = (line) => fs.writeSync(1, `${line}\n`);
    const stderrWrite = process.stderr.write.bind(process.stderr);
    this.log = (text) => {
      if (this.opts.verbose) stderrWrite(`[driver ${this.since()}s] ${text}\n`);
    };
    process.stdout.write = (chunk, ...rest) => {
      const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
      for (const line of text.split('\n')) {
        if (!line.startsWith('{')) continue;
        try {
          const rec = JSON.parse(line);
          if (rec.level >= 40 && this.summary.client_warnings.length < 50) {
            this.summary.client_warnings.push(String(rec.msg));
          }
        } catch {
          // not a pino line
        }
      }
      return stderrWrite(chunk, ...rest);
    };
  }

  since() {
    return Math.round(Date.now() - this.started) / 1000;
  }

  mark(name) {
    if (!(name in this.summary.marks)) this.summary.marks[name] = this.since();
  }

  error(where, err) {
    const text = `${where}: ${describe(err)}`.slice(0, 500);
    this.summary.errors.push(text);
    this.log(text);
  }

  // A call the model made; false when its call id was already seen.
  toolCall(name, callId, args) {
    if (this.summary.tool_calls.some((c) => c.call_id === callId)) return false;
    this.summary.tool_calls.push({ name, call_id: callId, arguments: args, conn: this.summary.connections });
    this.mark('tool_call');
    return true;
  }

  outputSent(callId) {
    if (this.outputCallIds.has(callId)) return;
    this.outputCallIds.add(callId);
    this.summary.tool_outputs_sent = this.outputCallIds.size;
    this.mark('output_sent');
  }

  // Every server event (the drivers hook the client's raw event stream): connections, acks, audio, errors.
  serverEvent(event) {
    switch (event?.type) {
      case 'session.created':
        this.summary.connections += 1;
        this.mark(`session_created_${this.summary.connections}`);
        break;
      case 'conversation.item.added':
      case 'conversation.item.created':
        if (event.item?.type === 'function_call_output' && this.outputCallIds.has(event.item.call_id)) {
          this.ackedCallIds.add(event.item.call_id);
          this.summary.output_acked = true;
          this.mark('output_acked');
        }
        break;
      case 'response.output_audio.delta':
      case 'response.audio.delta':
        this.summary.audio_chunks += 1;
        this.summary.audio_bytes += Buffer.from(event.delta ?? '', 'base64').length;
        break;
      case 'error':
        this.summary.server_errors.push(String(event.error?.code ?? null));
        break;
      default:
        break;
    }
  }

  // An assistant text from a finished response. The first one after a tool output ends the run (ok when the
  // server acknowledged an output of our tool), and so does one before any tool call.
  answer(text) {
    this.summary.answers.push(text);
    if (this.summary.tool_calls.length === 0) {
      this.finish(EXIT_DONE, 'an answer without a tool call');
    } else if (this.summary.final_answer === null && this.outputCallIds.size > 0) {
      this.summary.final_answer = text;
      this.summary.ok = this.summary.tool_calls.some(
        (c) => c.name === this.opts['tool-name'] && this.ackedCallIds.has(c.call_id),
      );
      this.finish(EXIT_DONE, 'final answer after the tool output');
    }
  }

  // The end: a run that reached its end keeps listening SETTLE_MS for trailing events (the answers to what the
  // client sent last), then `beforeExit` (capped at 1 s), the summary line, and the exit.
  finish(code, reason) {
    if (this.finished) return;
    this.finished = true;
    this.summary.status = STATUS[code];
    this.summary.finish_reason = reason;
    this.mark('finished');
    setTimeout(
      () => {
        const capped = new Promise((resolve) => setTimeout(resolve, 1000));
        void Promise.race([this.beforeExit().catch((err) => this.error('closing', err)), capped]).then(() => {
          this.summary.elapsed = this.since();
          this.writeLine(JSON.stringify(this.summary));
          // Let a close handshake leave before the process does.
          setTimeout(() => process.exit(code), 150);
        });
      },
      code === EXIT_DONE ? SETTLE_MS : 0,
    );
  }
}

export function describe(err) {
  if (err === undefined || err === null) return String(err);
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  if (typeof err === 'object') {
    // Session `error` events wrap an Error or the server's `error` event.
    if (err.error !== undefined) return describe(err.error);
    if (err.message) return String(err.message);
    try {
      return JSON.stringify(err);
    } catch {
      return String(err);
    }
  }
  return String(err);
}

// The text of a message item: its text parts, or the transcripts of its audio parts.
export function messageText(item) {
  if (!item || item.type !== 'message' || !Array.isArray(item.content)) return null;
  const parts = item.content
    .map((p) => (typeof p?.text === 'string' ? p.text : typeof p?.transcript === 'string' ? p.transcript : ''))
    .filter((t) => t);
  return parts.length ? parts.join('') : null;
}

// The tool body: --tool-seconds of work, then the order as JSON.
export async function lookupOrder(run, args) {
  run.mark('tool_started');
  await new Promise((resolve) => setTimeout(resolve, run.opts['tool-seconds'] * 1000));
  run.mark('tool_finished');
  return JSON.stringify({ order_id: args?.order_id ?? null, status: 'shipped', eta: 'tomorrow' });
}

// The installed version of a package (from its package.json in ./node_modules).
export function packageVersion(name) {
  const url = new URL(`./node_modules/${name}/package.json`, import.meta.url);
  return JSON.parse(fs.readFileSync(url, 'utf8')).version;
}
