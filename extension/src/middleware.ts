// What the client adds to the server's commands: the active file for palette calls, and a message
// where the server declines or has something to say.
import * as vscode from 'vscode';
import type { Middleware } from 'vscode-languageclient/node';
import { FILE_COMMANDS, IMPORT_TRACE, SAVE_TRACE } from './constants';
import { type ImportAnswer, reportImport } from './importedTrace';

/**
 * Palette invocations carry no arguments: fill in the active editor's document. A server command
 * that answers `{started: false, reason}` (untrusted workspace, nothing traced yet, no measurement
 * waiting for the GPU) says why. An imported trace is said as the CLI says it (`importedTrace.ts`),
 * its details in `log`.
 */
export const commandMiddleware = (log?: vscode.LogOutputChannel): Middleware => ({
  executeCommand: async (command, args, next) => {
    if (FILE_COMMANDS.has(command) && (args.length === 0 || args[0] === undefined)) {
      const uri = vscode.window.activeTextEditor?.document.uri;
      if (!uri) {
        void vscode.window.showWarningMessage('Compile Lens: open a Python file first.');
        return undefined;
      }
      args = [uri.toString(), ...args.slice(1)];
    }
    if (command === IMPORT_TRACE && (args.length === 0 || !args[0])) {
      // a TORCH_TRACE folder (one log per rank) or one log; scripts and the e2e pass the path
      const picked = await vscode.window.showOpenDialog({
        canSelectFiles: true, canSelectFolders: true, canSelectMany: false, openLabel: 'Import torch trace',
      });
      if (!picked || picked.length === 0) {
        return undefined;
      }
      args = [picked[0].fsPath];
    }
    const result: unknown = await next(command, args);
    const answer = result as { started?: unknown; imported?: unknown; reason?: unknown; dir?: unknown } | undefined;
    if (answer && (answer.started === false || answer.imported === false) && typeof answer.reason === 'string') {
      void vscode.window.showInformationMessage(`Compile Lens: ${answer.reason}`);
    } else if (command === IMPORT_TRACE && answer && answer.imported === true) {
      reportImport(answer as ImportAnswer, log);
    } else if (command === SAVE_TRACE && answer && typeof answer.dir === 'string') {
      // the folder TORCH_TRACE would have written: `tlparse` reads each file in it
      void vscode.window.showInformationMessage(`Compile Lens: torch trace saved in ${answer.dir} (run tlparse on it)`);
    }
    return result;
  },
});
