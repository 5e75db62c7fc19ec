// The server's stderr (Python logging) into the output channel, at the levels it was logged.
import * as readline from 'readline';
import type { Readable } from 'stream';
import type * as vscode from 'vscode';

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

const PYTHON_LEVELS: Record<string, LogLevel> = {
  DEBUG: 'debug',
  INFO: 'info',
  WARNING: 'warn',
  WARN: 'warn',
  ERROR: 'error',
  CRITICAL: 'error',
};
const LOG_LINE =
  /^(?:\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d+)?\s+)?(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)(?::|\s)\s*(.*)$/;

/**
 * One line of the server's stderr (Python logging, `%(asctime)s %(levelname)s %(name)s: ...`)
 * as a log level and message, without the timestamp the output channel adds again. Lines without
 * a level (tracebacks, prints) keep the level of the line before them.
 */
export function parseServerLogLine(
  line: string,
  previous: LogLevel = 'info',
): { level: LogLevel; message: string } {
  const match = LOG_LINE.exec(line);
  if (!match) {
    return { level: previous, message: line };
  }
  return { level: PYTHON_LEVELS[match[1]], message: match[2] };
}

/** Server stderr into the output channel at the levels the server logged them. */
export function pipeServerLog(input: Readable, channel: vscode.LogOutputChannel): void {
  let level: LogLevel = 'info';
  readline
    .createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 })
    .on('line', (line: string) => {
      const parsed = parseServerLogLine(line, level);
      level = parsed.level;
      channel[level](parsed.message);
    });
}
