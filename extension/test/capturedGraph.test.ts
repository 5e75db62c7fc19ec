// The captured graphs' documents: the lens's command opens a `compile-lens:` document beside the
// editor whose text is the server's answer (or why there is none), and the command is the client's own.
import * as assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { CapturedGraphs, graphOf, graphUri } from '../src/capturedGraph';
import { CAPTURED_GRAPH, CLIENT_COMMANDS, GRAPH_SCHEME, KERNELS_AT, SHOW_CAPTURED_GRAPH, SHOW_KERNELS } from '../src/constants';
import * as vscode from './stubs/vscode';

const { stub } = vscode;

describe('captured graphs', () => {
  beforeEach(() => stub.reset());

  test('the document URI names the file and target for its tab, and carries both back', () => {
    const uri = graphUri({ uri: 'file:///work/project/net.py', target: 'Net' });
    assert.equal(uri.scheme, GRAPH_SCHEME);
    assert.equal(uri.path, '/net.py · Net graphs.py');
    assert.deepEqual(graphOf(uri.query), { uri: 'file:///work/project/net.py', target: 'Net' });
    assert.equal(graphOf('not json'), undefined);
    assert.equal(graphOf('{"uri": 3}'), undefined);
  });

  test("the lens's command opens the server's text beside the editor", async () => {
    const graphs = new CapturedGraphs();
    vscode.workspace.registerTextDocumentContentProvider(GRAPH_SCHEME, graphs);
    vscode.commands.registerCommand(CAPTURED_GRAPH, (uri, target) => ({ text: `# graphs of ${String(target)} in ${String(uri)}\n` }));
    await graphs.show('file:///work/project/net.py', 'Net');
    const asked = stub.executed.find((e) => e.command === CAPTURED_GRAPH);
    assert.deepEqual(asked?.args, ['file:///work/project/net.py', 'Net']);
    assert.equal(stub.shown.length, 1);
    assert.equal(stub.shown[0].path, '/net.py · Net graphs.py');
    assert.equal(stub.shown[0].viewColumn, vscode.ViewColumn.Beside);
  });

  test("the server's refusal or absence is said in the document", async () => {
    const graphs = new CapturedGraphs();
    const query = JSON.stringify({ uri: 'file:///w/net.py', target: 'Net' });
    vscode.commands.registerCommand(CAPTURED_GRAPH, () => ({ started: false, reason: '`Net` has not been traced yet' }));
    assert.equal(await graphs.provideTextDocumentContent(vscode.Uri.from({ scheme: GRAPH_SCHEME, path: '/x', query }) as never),
      '# Compile Lens: `Net` has not been traced yet.\n');
    stub.reset();
    assert.equal(await graphs.provideTextDocumentContent(vscode.Uri.from({ scheme: GRAPH_SCHEME, path: '/x', query }) as never),
      '# Compile Lens: the server is not running.\n');
  });

  test('the commands are the client\'s own: the server may put them in its lens and hovers', () => {
    assert.ok(CLIENT_COMMANDS.includes(SHOW_CAPTURED_GRAPH) && CLIENT_COMMANDS.includes(SHOW_KERNELS));
  });

  test("a line's kernels open from the server's KERNELS_AT answer", async () => {
    const graphs = new CapturedGraphs();
    vscode.workspace.registerTextDocumentContentProvider(GRAPH_SCHEME, graphs);
    vscode.commands.registerCommand(KERNELS_AT, (uri, line) => ({ text: `kernels of ${String(uri)}:${String(line)}\n` }));
    await graphs.showKernels('file:///work/project/net.py', 14);
    assert.deepEqual(stub.executed.find((e) => e.command === KERNELS_AT)?.args, ['file:///work/project/net.py', 14]);
    assert.equal(stub.shown[0].path, '/net.py:14 kernels.txt');
    assert.deepEqual(graphOf(JSON.stringify({ uri: 'file:///a.py', line: 3 })), { uri: 'file:///a.py', line: 3 });
  });
});
