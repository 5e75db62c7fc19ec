// The graphs TorchDynamo captured for a target, as a read-only `compile-lens:` document: the server's
// "⊞ N graphs captured: show" lens runs SHOW_CAPTURED_GRAPH here (it is in CLIENT_COMMANDS); the
// document's text is the server's answer to CAPTURED_GRAPH, asked again each time it is opened.
import * as path from 'node:path';
import * as vscode from 'vscode';
import { CAPTURED_GRAPH, GRAPH_SCHEME } from './constants';

/** What a graph document's URI carries: the file it is of and the target. */
export interface GraphOf {
  uri: string;
  target: string;
}

/** `compile-lens:/net.py · Net graphs.py?{"uri":…,"target":…}`: a title a tab can show, the rest in the query. */
export function graphUri(of: GraphOf): { scheme: string; path: string; query: string } {
  const file = path.posix.basename(vscode.Uri.parse(of.uri).fsPath || of.uri);
  return { scheme: GRAPH_SCHEME, path: `/${file} · ${of.target} graphs.py`, query: JSON.stringify(of) };
}

export function graphOf(query: string): GraphOf | undefined {
  try {
    const parsed = JSON.parse(query) as Partial<GraphOf>;
    return typeof parsed.uri === 'string' && typeof parsed.target === 'string'
      ? { uri: parsed.uri, target: parsed.target }
      : undefined;
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
    answer = await vscode.commands.executeCommand(CAPTURED_GRAPH, of.uri, of.target);
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
    if (typeof uri !== 'string' || typeof target !== 'string') {
      return;
    }
    const doc = await vscode.workspace.openTextDocument(vscode.Uri.from(graphUri({ uri, target })));
    await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.Beside, preview: true });
  }
}
