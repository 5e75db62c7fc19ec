// `compileLens.compareTorch`: the current file checked with both the server's interpreter and
// `compileLens.compareInterpreter` (the next torch, before upgrading), in a terminal: the CLI's
// `check --compare-with` does the work and prints its table and verdict there.
import * as vscode from 'vscode';
import { SECTION } from './constants';
import { ServerCommand } from './serverCommand';
import { primaryFolder, resolveVariables } from './settings';

/** The setting that names the other interpreter. */
export const COMPARE_SETTING = 'compareInterpreter';

/** The CLI run that compares `file` under the server's interpreter with `other` (same env). */
export function compareCommand(server: ServerCommand, file: string, other: string): ServerCommand {
  const args = server.args.slice(0, -2); // the interpreter's own arguments, before `-m compile_lens`
  return {
    command: server.command,
    args: [...args, '-m', 'compile_lens.cli', 'check', file, '--compare-with', other],
    env: server.env,
  };
}

/** Runs the comparison of the active Python file in a terminal; says why when it cannot. */
export async function compareTorch(resolve: () => Promise<ServerCommand>): Promise<void> {
  if (!vscode.workspace.isTrusted) {
    void vscode.window.showWarningMessage('Compile Lens: comparing torch versions runs your code; trust the workspace first.');
    return;
  }
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.document.languageId !== 'python' || editor.document.uri.scheme !== 'file') {
    void vscode.window.showWarningMessage('Compile Lens: open a Python file to compare torch versions on.');
    return;
  }
  const raw = vscode.workspace.getConfiguration(SECTION).get<string>(COMPARE_SETTING, '');
  const other = resolveVariables(raw.trim(), primaryFolder());
  if (!other) {
    const open = 'Open Settings';
    const picked = await vscode.window.showWarningMessage(
      'Compile Lens: set compileLens.compareInterpreter to the other torch’s Python (e.g. a venv’s bin/python).',
      open,
    );
    if (picked === open) {
      void vscode.commands.executeCommand('workbench.action.openSettings', `${SECTION}.${COMPARE_SETTING}`);
    }
    return;
  }
  await editor.document.save();
  const run = compareCommand(await resolve(), editor.document.uri.fsPath, other);
  const terminal = vscode.window.createTerminal({
    name: 'Compile Lens: compare torch',
    shellPath: run.command,
    shellArgs: run.args,
    env: run.env,
  });
  terminal.show();
}
