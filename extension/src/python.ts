// Which Python runs the Compile Lens server (and, through it, the torch workers).
//
// Order: the `compileLens.interpreter` setting, then the interpreter selected in the Python
// extension (ms-python.python), then `python3` on PATH.
//
// The Python extension is used when it is installed, never required: it is deliberately NOT in
// `extensionDependencies`, because an editor without a marketplace that has it (code-server with
// Open VSX only, offline installs, VSCodium) would then refuse to activate Compile Lens at all.
// `@vscode/python-extension` only looks the extension up at run time, so its absence costs nothing.
import * as vscode from 'vscode';
import { PythonExtension } from '@vscode/python-extension';
import { SECTION } from './constants';
import { resolveVariables } from './settings';

export const PYTHON_EXTENSION_ID = 'ms-python.python';
export const DEFAULT_INTERPRETER = 'python3';

export type InterpreterSource = 'setting' | 'python-extension' | 'default';

export interface Interpreter {
  /** Executable followed by any extra arguments, before `-m compile_lens`. */
  command: string[];
  source: InterpreterSource;
}

/** `compileLens.interpreter` as an argv list ([] when unset). Accepts a string or a string array. */
export function interpreterFromSetting(
  value: unknown,
  folder: vscode.WorkspaceFolder | undefined,
): string[] {
  const items = typeof value === 'string' ? [value] : Array.isArray(value) ? value : [];
  return items
    .filter((item): item is string => typeof item === 'string' && item.trim() !== '')
    .map((item) => resolveVariables(item, folder));
}

async function pythonExtensionApi(): Promise<PythonExtension | undefined> {
  if (!vscode.extensions.getExtension(PYTHON_EXTENSION_ID)) {
    return undefined;
  }
  return PythonExtension.api();
}

/** The executable of the Python extension's active environment for `folder`, if any. */
export async function interpreterFromPythonExtension(
  folder: vscode.WorkspaceFolder | undefined,
): Promise<string | undefined> {
  const api = await pythonExtensionApi();
  if (!api) {
    return undefined;
  }
  const active = api.environments.getActiveEnvironmentPath(folder?.uri);
  const resolved = await api.environments.resolveEnvironment(active);
  return resolved?.executable.uri?.fsPath;
}

export async function resolveInterpreter(
  folder: vscode.WorkspaceFolder | undefined,
  log?: vscode.LogOutputChannel,
): Promise<Interpreter> {
  const setting = vscode.workspace
    .getConfiguration(SECTION, folder?.uri)
    .get<unknown>('interpreter');
  const fromSetting = interpreterFromSetting(setting, folder);
  if (fromSetting.length > 0) {
    return { command: fromSetting, source: 'setting' };
  }
  try {
    const fromExtension = await interpreterFromPythonExtension(folder);
    if (fromExtension) {
      return { command: [fromExtension], source: 'python-extension' };
    }
  } catch (err) {
    log?.warn(`Python extension did not give an interpreter: ${String(err)}`);
  }
  return { command: [DEFAULT_INTERPRETER], source: 'default' };
}

/** Calls `listener` when the Python extension's selected interpreter changes (no-op without it). */
export async function onDidChangePythonInterpreter(
  listener: () => void,
): Promise<vscode.Disposable | undefined> {
  try {
    const api = await pythonExtensionApi();
    return api?.environments.onDidChangeActiveEnvironmentPath(() => listener());
  } catch {
    return undefined;
  }
}
