// The compile report webview (`compileLens.showReport`): the server renders the page from what it
// holds for the open files (`compileLens.reportHtml`); this shows it in a panel and opens the
// locations the page's links name. The page's CSP allows only its own nonce'd script, which posts
// `{type: 'open', path, line, column}` for a clicked location.
import * as path from 'path';
import * as vscode from 'vscode';
import { REPORT_HTML, REPORT_VIEW_TYPE, SHOW_KERNELS, SHOW_REPORT } from './constants';


export interface OpenLocationMessage {
  type: 'open';
  path: string;
  line: number;
  column: number;
}

/** A well-formed "open this file at this line" message from the page (anything else: undefined). */
export function parseOpenMessage(message: unknown): OpenLocationMessage | undefined {
  if (typeof message !== 'object' || message === null) {
    return undefined;
  }
  const m = message as Record<string, unknown>;
  if (m.type !== 'open' || typeof m.path !== 'string' || !path.isAbsolute(m.path)) {
    return undefined;
  }
  const whole = (value: unknown): number =>
    typeof value === 'number' && Number.isFinite(value) ? Math.max(1, Math.floor(value)) : 1;
  return { type: 'open', path: m.path, line: whole(m.line), column: whole(m.column) };
}

/** Opens the file at the 1-based line and column, in the editor group beside the report. */
export async function openLocation(location: OpenLocationMessage): Promise<void> {
  const document = await vscode.workspace.openTextDocument(vscode.Uri.file(location.path));
  const position = new vscode.Position(location.line - 1, location.column - 1);
  await vscode.window.showTextDocument(document, {
    viewColumn: vscode.ViewColumn.One,
    selection: new vscode.Range(position, position),
    preserveFocus: false,
  });
}

/** What the page posted: opens a location, or ignores what it does not understand. */
export async function handleReportMessage(
  message: unknown,
  log?: vscode.LogOutputChannel,
): Promise<boolean> {
  const location = parseOpenMessage(message);
  if (!location) {
    log?.debug(`report: ignored message ${JSON.stringify(message)?.slice(0, 200)}`);
    return false;
  }
  try {
    await openLocation(location);
    return true;
  } catch (err) {
    void vscode.window.showWarningMessage(
      `Compile Lens: cannot open ${location.path}:${location.line}: ${String(err)}`,
    );
    return false;
  }
}

/** The uri argument of the command: the one given, else the active Python editor's, else all open files. */
export function reportTarget(arg: unknown): string | null {
  if (typeof arg === 'string' && arg) {
    return arg;
  }
  if (arg instanceof vscode.Uri) {
    return arg.toString();
  }
  const document = vscode.window.activeTextEditor?.document;
  if (document && document.languageId === 'python') {
    return document.uri.toString();
  }
  return null;
}

const LOADING =
  '<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="default-src \'none\'; ' +
  "style-src 'unsafe-inline';\"><style>body{font-family:var(--vscode-font-family);" +
  'color:var(--vscode-descriptionForeground);padding:20px 28px}</style></head>' +
  '<body>Compile Lens: building the report…</body></html>';

function errorPage(text: string): string {
  const escaped = text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  return LOADING.replace('Compile Lens: building the report…', `Compile Lens: ${escaped}`);
}

/** One report panel, reused: showing the report again refreshes it and brings it forward. */
export class ReportView implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(private readonly log?: vscode.LogOutputChannel) {}

  get current(): vscode.WebviewPanel | undefined {
    return this.panel;
  }

  /** `target` (a hover card's Details link): the page opens at that target's details. */
  async show(arg?: unknown, target?: unknown): Promise<void> {
    const uri = reportTarget(arg);
    const panel = this.ensurePanel();
    panel.title = uri ? `Compile Report: ${path.basename(vscode.Uri.parse(uri).fsPath)}` : 'Compile Report';
    let answer: unknown;
    try {
      answer = await (typeof target === 'string' && target
        ? vscode.commands.executeCommand(REPORT_HTML, uri, target)
        : vscode.commands.executeCommand(REPORT_HTML, uri));
    } catch (err) {
      this.log?.warn(`report: ${REPORT_HTML} failed: ${String(err)}`);
      panel.webview.html = errorPage(`the server could not build the report (${String(err)}).`);
      return;
    }
    const html = (answer as { html?: unknown } | undefined)?.html;
    if (this.panel !== panel) {
      return; // closed while the server answered
    }
    panel.webview.html =
      typeof html === 'string' ? html : errorPage('the server is not running; see Compile Lens: Show Output.');
  }

  private ensurePanel(): vscode.WebviewPanel {
    if (this.panel) {
      this.panel.reveal(undefined, true);
      return this.panel;
    }
    const panel = vscode.window.createWebviewPanel(
      REPORT_VIEW_TYPE,
      'Compile Report',
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
      // The script only turns location clicks into messages; the page loads nothing.
      { enableScripts: true, enableCommandUris: false, localResourceRoots: [], retainContextWhenHidden: false },
    );
    panel.webview.html = LOADING;
    this.panel = panel;
    this.subscriptions.push(
      panel.webview.onDidReceiveMessage((message: unknown) => handleReportMessage(message, this.log)),
      panel.onDidDispose(() => {
        if (this.panel === panel) {
          this.panel = undefined;
        }
      }),
    );
    return panel;
  }

  dispose(): void {
    this.panel?.dispose();
    this.panel = undefined;
    for (const item of this.subscriptions.splice(0)) {
      item.dispose();
    }
  }
}

/**
 * Hovers from this server are plain Markdown; the card's "Open the compile report" (or "Details") link and a line's
 * "Show the kernels behind this line" are `command:` links, which VS Code follows only in a trusted
 * MarkdownString. Trust is granted for those two commands, nothing else.
 */
export function trustReportLinks(hover: vscode.Hover | null | undefined): vscode.Hover | null | undefined {
  if (!hover) {
    return hover;
  }
  for (const content of hover.contents) {
    const linked = [SHOW_REPORT, SHOW_KERNELS].filter((c) => content instanceof vscode.MarkdownString && content.value.includes(`command:${c}`));
    if (linked.length && content instanceof vscode.MarkdownString) {
      content.isTrusted = { enabledCommands: linked };
    }
  }
  return hover;
}

export const hoverMiddleware = {
  provideHover: async (
    document: vscode.TextDocument,
    position: vscode.Position,
    token: vscode.CancellationToken,
    next: (
      document: vscode.TextDocument,
      position: vscode.Position,
      token: vscode.CancellationToken,
    ) => vscode.ProviderResult<vscode.Hover>,
  ): Promise<vscode.Hover | null | undefined> => trustReportLinks(await next(document, position, token)),
};
