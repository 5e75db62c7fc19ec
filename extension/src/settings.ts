// compileLens.* settings as the server reads them: a flat object keyed without the prefix, nested
// keys as dotted strings ("worker.timeoutSeconds"), with ${workspaceFolder} & co. resolved here.
import * as os from 'os';
import * as vscode from 'vscode';
import { SECTION } from './constants';

/** Settings that only the client uses; the server never sees them. */
const CLIENT_ONLY = new Set(['interpreter', 'compareInterpreter', 'mcp.enabled']);

export type FlatSettings = Record<string, unknown>;

/** Replaces ${workspaceFolder}, ${workspaceFolderBasename}, ${userHome} and ${env:NAME}. */
export function resolveVariables(value: string, folder: vscode.WorkspaceFolder | undefined): string {
  return value.replace(/\$\{([^}]+)\}/g, (whole, name: string) => {
    if (name === 'workspaceFolder' && folder) {
      return folder.uri.fsPath;
    }
    if (name === 'workspaceFolderBasename' && folder) {
      return folder.name;
    }
    if (name === 'userHome') {
      return os.homedir();
    }
    if (name.startsWith('env:')) {
      return process.env[name.slice(4)] ?? '';
    }
    return whole;
  });
}

function resolveDeep(value: unknown, folder: vscode.WorkspaceFolder | undefined): unknown {
  if (typeof value === 'string') {
    return resolveVariables(value, folder);
  }
  if (Array.isArray(value)) {
    return value.map((item) => resolveDeep(item, folder));
  }
  return value;
}

/** The setting keys (without prefix) that the extension contributes, from its package.json. */
export function contributedKeys(packageJSON: unknown): string[] {
  const properties =
    (packageJSON as { contributes?: { configuration?: { properties?: object } } })?.contributes
      ?.configuration?.properties ?? {};
  return Object.keys(properties)
    .filter((key) => key.startsWith(`${SECTION}.`))
    .map((key) => key.slice(SECTION.length + 1));
}

/** The server's settings for `folder`: every contributed key except client-only ones. */
export function serverSettings(
  keys: readonly string[],
  folder: vscode.WorkspaceFolder | undefined,
): FlatSettings {
  const config = vscode.workspace.getConfiguration(SECTION, folder?.uri);
  const settings: FlatSettings = {};
  for (const key of keys) {
    if (CLIENT_ONLY.has(key)) {
      continue;
    }
    const value = config.get<unknown>(key);
    if (value !== undefined) {
      settings[key] = resolveDeep(value, folder);
    }
  }
  return settings;
}

/** The folder whose settings the (single) server uses: the first workspace folder. */
export function primaryFolder(): vscode.WorkspaceFolder | undefined {
  return vscode.workspace.workspaceFolders?.[0];
}
