// What was compiled, as read-only `compile-lens:` documents: the graphs TorchDynamo captured for a
// target (the server's "⊞ N graphs captured: show" lens runs SHOW_CAPTURED_GRAPH here) and the kernels
// behind a measured line (its hover links SHOW_KERNELS). Both are in CLIENT_COMMANDS; the text is the
// server's answer to CAPTURED_GRAPH or KERNELS_AT, asked again each time the document is opened.
import * as path from 'node:path';
import * as vscode from 'vscode';
import { CAPTURED_GRAPH, GRAPH_SCHEME, KERNELS_AT } from './constants';

/** What a document's URI carries: the file it is of and the target (its graphs) or a line (its kernels). */
export interface GraphOf {
  uri: string;
  target?: string;
  line?: number;
}

/** `compile-lens:/net.py · Net graphs.py?{"uri":…,"target":…}` (or `net.py:14 kernels.txt`): a title a tab can show, the rest in the query. */
export function graphUri(of: GraphOf): { scheme: string; path: string; query: string } {
  const file = path.posix.basename(vscode.Uri.parse(of.uri).fsPath || of.uri);
  const title = of.target !== undefined ? `${file} · ${of.target} graphs.py` : `${file}:${String(of.line)} kernels.txt`;
  return { scheme: GRAPH_SCHEME, path: `/${title}`, query: JSON.stringify(of) };
}

export function graphOf(query: string): GraphOf | undefined {
  try {
    const parsed = JSON.parse(query) as Partial<GraphOf>;
    if (typeof parsed.uri !== 'string') {
      return undefined;
    }
    if (typeof parsed.target === 'string') {
      return { uri: parsed.uri, target: parsed.target };
    }
    return typeof parsed.line === 'number' ? { uri: parsed.uri, line: parsed.line } : undefined;
  } catch {
    return undefined;
  }
}

/** The text of a graph document: the server's, or why there is none. */
export async function graphText(of: GraphOf | undefined): Promise<string> {
  if (!of) {
    return '# Compile Lens: this document names no file and target.\n';
  }
  let answer: unknown;
  try {
    answer = of.target !== undefined
      ? await vscode.commands.executeCommand(CAPTURED_GRAPH, of.uri, of.target)
      : await vscode.commands.executeCommand(KERNELS_AT, of.uri, of.line);
  } catch (err) {
    return `# Compile Lens: the server could not answer (${String(err)}).\n`;
  }
  const found = answer as { text?: unknown; reason?: unknown } | undefined;
  if (typeof found?.text === 'string') {
    return found.text;
  }
  return `# Compile Lens: ${typeof found?.reason === 'string' ? found.reason : 'the server is not running'}.\n`;
}

export class CapturedGraphs implements vscode.TextDocumentContentProvider {
  provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    return graphText(graphOf(uri.query));
  }

  /** The lens's command: open the target's graphs beside the editor, read-only. */
  async show(uri: unknown, target: unknown): Promise<void> {
    if (typeof uri === 'string' && typeof target === 'string') {
      await this.open({ uri, target });
    }
  }

  /** The line hover's link: the kernels behind a measured line (1-based), read-only. */
  async showKernels(uri: unknown, line: unknown): Promise<void> {
    if (typeof uri === 'string' && typeof line === 'number') {
      await this.open({ uri, line });
    }
  }

  private async open(of: GraphOf): Promise<void> {
    const doc = await vscode.workspace.openTextDocument(vscode.Uri.from(graphUri(of)));
    await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.Beside, preview: true });
  }
}
