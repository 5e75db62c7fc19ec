// `compile-lens mcp` for VS Code's agent mode: registered through `vscode.lm.registerMcpServerDefinitionProvider`
// where this VS Code has it (1.101+; our @types/vscode is 1.91, so it is looked up at run time and its
// absence is no error). The server runs with the language server's interpreter and environment, and
// `--trust` names the workspace folders only while the workspace is trusted: in Restricted Mode its
// tools run no code. `compileLens.mcp.enabled: false` withdraws it.
import * as vscode from 'vscode';
import { SECTION } from './constants';
import type { ServerCommand } from './serverCommand';

/** package.json's `contributes.mcpServerDefinitionProviders[0].id`. */
export const MCP_PROVIDER_ID = 'compileLens.mcp';
/** The setting that turns the registration off (`compileLens.mcp.enabled`). */
export const MCP_SETTING = 'mcp.enabled';
export const MCP_LABEL = 'Compile Lens';

interface McpProvider {
  onDidChangeMcpServerDefinitions: vscode.Event<void>;
  provideMcpServerDefinitions(): Promise<unknown[]>;
}

/** The part of the newer API this file uses, as it is found on the `vscode` module. */
interface McpApi {
  lm: { registerMcpServerDefinitionProvider(id: string, provider: McpProvider): vscode.Disposable };
  McpStdioServerDefinition: new (
    label: string,
    command: string,
    args?: string[],
    env?: Record<string, string | number | null>,
    version?: string,
  ) => { cwd?: vscode.Uri };
}

/** The API where this VS Code has it; undefined where it does not. */
export function mcpApi(api: unknown = vscode): McpApi | undefined {
  const found = api as Partial<McpApi> & { lm?: Partial<McpApi['lm']> };
  if (typeof found.lm?.registerMcpServerDefinitionProvider !== 'function') {
    return undefined;
  }
  if (typeof found.McpStdioServerDefinition !== 'function') {
    return undefined;
  }
  return found as McpApi;
}

/** The language server's command line turned into the MCP server's: `-m compile_lens.cli mcp --trust DIR...`. */
export function mcpCommand(server: ServerCommand, trusted: readonly string[]): ServerCommand {
  const args = server.args.slice(0, -2); // the interpreter's own arguments, before `-m compile_lens`
  return {
    command: server.command,
    args: [...args, '-m', 'compile_lens.cli', 'mcp', ...trusted.flatMap((folder) => ['--trust', folder])],
    env: server.env,
  };
}

/** The folders whose code the tools may run: the workspace's, when it is trusted. */
export function trustedFolders(): string[] {
  if (!vscode.workspace.isTrusted) {
    return [];
  }
  return (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file').map((f) => f.uri.fsPath);
}

/**
 * Registers the MCP server with VS Code where the API exists; undefined (and nothing registered)
 * where it does not. `resolve` gives the language server's command line.
 */
export function registerMcpServer(
  resolve: () => Promise<ServerCommand>,
  version: string,
  api: unknown = vscode,
  onError: (error: unknown) => void = () => undefined,
): vscode.Disposable | undefined {
  const found = mcpApi(api);
  if (!found) {
    return undefined;
  }
  try {
    return register(found, resolve, version);
  } catch (error) {
    // an editor whose API is there but refuses (a fork, a policy): the language features go on
    onError(error);
    return undefined;
  }
}

function register(found: McpApi, resolve: () => Promise<ServerCommand>, version: string): vscode.Disposable {
  const changed = new vscode.EventEmitter<void>();
  const provider: McpProvider = {
    onDidChangeMcpServerDefinitions: changed.event,
    async provideMcpServerDefinitions() {
      if (!vscode.workspace.getConfiguration(SECTION).get<boolean>(MCP_SETTING, true)) {
        return [];
      }
      const run = mcpCommand(await resolve(), trustedFolders());
      const definition = new found.McpStdioServerDefinition(MCP_LABEL, run.command, run.args, run.env, version);
      const folder = vscode.workspace.workspaceFolders?.[0];
      if (folder) {
        definition.cwd = folder.uri;
      }
      return [definition];
    },
  };
  const registration = found.lm.registerMcpServerDefinitionProvider(MCP_PROVIDER_ID, provider);
  const subscriptions = [
    changed,
    registration,
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration(`${SECTION}.${MCP_SETTING}`) || event.affectsConfiguration(`${SECTION}.interpreter`)) {
        changed.fire();
      }
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => changed.fire()),
  ];
  return { dispose: () => subscriptions.forEach((s) => s.dispose()) };
}
