// What `compileLens.importTrace` found, said as `compile-lens import` says it: ranks that part as an
// error notification, the notes and the paths not mapped onto the workspace in the output channel,
// and a summary message that counts what is shown and what is not. Nothing is dropped unsaid.
import * as vscode from 'vscode';

/** The server's answer to an import that succeeded (lsp/features/imported_trace.py). */
export interface ImportAnswer {
  imported: true;
  files?: string[];
  diagnostics?: number;
  ranks?: { rank: number | null; file: string }[];
  divergence?: string[];
  unmapped?: { path: string; why: string }[];
  unmapped_findings?: number;
  notes?: string[];
  kind?: 'profile';
  summary?: string[]; // a profile's figures in words, as `compile-lens import` prints them
}

export const SHOW_OUTPUT = 'Show Output';

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** The summary line: what is shown, then what is not and where to read about it. */
export function importSummary(answer: ImportAnswer): string {
  const shown = answer.diagnostics ?? 0;
  const files = answer.files?.length ?? 0;
  const logs = answer.ranks?.length ?? 0;
  const what = answer.kind === 'profile' ? `profile (${plural(logs, 'rank')})` : `torch trace (${plural(logs, 'log')})`;
  const found = answer.kind === 'profile' ? plural(shown, 'line') + ' with GPU time' : plural(shown, 'finding');
  const parts = [`imported ${what}: ${found} in ${plural(files, 'file')}`];
  const hidden = answer.unmapped_findings ?? 0;
  if (hidden) {
    parts.push(`${plural(hidden, 'finding')} in files not mapped onto the workspace (listed in the output)`);
  }
  const unmapped = answer.unmapped?.length ?? 0;
  if (unmapped) {
    parts.push(`${plural(unmapped, 'path')} not mapped`);
  }
  const notes = answer.notes?.length ?? 0;
  if (notes) {
    parts.push(plural(notes, 'note'));
  }
  const divergence = answer.divergence?.length ?? 0;
  if (divergence) {
    parts.push(`ranks part (${divergence})`);
  }
  return `Compile Lens: ${parts.join('; ')}`;
}

/** Everything the CLI prints beside the findings, to the output channel. */
export function logImport(answer: ImportAnswer, log?: vscode.LogOutputChannel): void {
  if (!log) {
    return;
  }
  log.info(importSummary(answer).replace(/^Compile Lens: /, ''));
  for (const line of answer.summary ?? []) {
    log.info(line);
  }
  for (const text of answer.divergence ?? []) {
    log.error(`error: ${text}`);
  }
  for (const note of answer.notes ?? []) {
    log.warn(`note: ${note}`);
  }
  const unmapped = answer.unmapped ?? [];
  if (unmapped.length) {
    log.info(`Not mapped onto the workspace (${unmapped.length}; shown with the run's path):`);
    for (const entry of unmapped) {
      log.info(`  ${entry.path}: ${entry.why}`);
    }
  }
}

/** Say an import: the output channel, the error for ranks that part, and the summary. */
export function reportImport(answer: ImportAnswer, log?: vscode.LogOutputChannel): void {
  logImport(answer, log);
  const open = (choice: string | undefined) => {
    if (choice === SHOW_OUTPUT) {
      log?.show();
    }
  };
  const divergence = answer.divergence ?? [];
  if (divergence.length) {
    const more = divergence.length > 1 ? ` (and ${divergence.length - 1} more partings: see the output)` : '';
    void vscode.window.showErrorMessage(`Compile Lens: ${divergence[0]}${more}`, SHOW_OUTPUT).then(open);
  }
  const quiet = !(answer.unmapped_findings || answer.unmapped?.length || answer.notes?.length || divergence.length);
  if (quiet) {
    void vscode.window.showInformationMessage(importSummary(answer));
  } else {
    void vscode.window.showWarningMessage(importSummary(answer), SHOW_OUTPUT).then(open);
  }
}
