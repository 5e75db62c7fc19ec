// The compile report webview: the page's "open location" messages, the panel, trusted hover links.
import * as assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { activate, deactivate } from '../src/extension';
import { REPORT_HTML, SHOW_REPORT } from '../src/constants';
import { handleReportMessage, hoverMiddleware, parseOpenMessage, ReportView } from '../src/report';
import { fakeContext, resetStubs } from './helpers';
import { clients } from './stubs/languageclient';
import { Hover, MarkdownString, stub, Uri, ViewColumn, window } from './stubs/vscode';

describe('report messages', () => {
  beforeEach(resetStubs);

  test('an open message opens the file at its 1-based line and column', async () => {
    const opened = await handleReportMessage({ type: 'open', path: '/work/project/net.py', line: 12, column: 5 });
    assert.equal(opened, true);
    assert.deepEqual(stub.shown, [
      { path: '/work/project/net.py', line: 11, character: 4, viewColumn: ViewColumn.One },
    ]);
  });

  test('a missing or odd line and column open at the start', async () => {
    await handleReportMessage({ type: 'open', path: '/work/project/net.py', line: 'x' });
    await handleReportMessage({ type: 'open', path: '/work/project/net.py', line: -3, column: 2.7 });
    assert.deepEqual(
      stub.shown.map((s) => [s.line, s.character]),
      [
        [0, 0],
        [0, 1],
      ],
    );
  });

  test('anything else is ignored', async () => {
    for (const message of [undefined, null, 'open', { type: 'open' }, { type: 'open', path: 'relative.py', line: 1 },
      { type: 'refresh' }, { type: 'open', path: 42, line: 1 }]) {
      assert.equal(parseOpenMessage(message), undefined, JSON.stringify(message));
      assert.equal(await handleReportMessage(message), false);
    }
    assert.deepEqual(stub.shown, []);
  });

  test('a file that cannot be opened says so', async () => {
    stub.unreadable.add('/work/project/gone.py');
    assert.equal(await handleReportMessage({ type: 'open', path: '/work/project/gone.py', line: 3 }), false);
    assert.match(stub.messages.at(-1)?.text ?? '', /cannot open \/work\/project\/gone\.py:3/);
  });
});

describe('report panel', () => {
  let view: ReportView;
  const asked: unknown[] = [];
  beforeEach(() => {
    resetStubs();
    asked.length = 0;
    stub.registered.set(REPORT_HTML, (uri: unknown, ...rest: unknown[]) => {
      asked.push(rest.length ? [uri, ...rest] : uri);
      return { html: `<html><body>report for ${String(uri)}</body></html>` };
    });
    view = new ReportView();
  });
  afterEach(() => view.dispose());

  test('shows the server page for the active Python file in one reused panel', async () => {
    const uri = Uri.file('/work/project/net.py');
    window.activeTextEditor = { document: { uri, languageId: 'python' } };
    await view.show();
    assert.equal(stub.panels.length, 1);
    const panel = stub.panels[0];
    assert.equal(panel.viewType, 'compileLens.report');
    assert.equal(panel.title, 'Compile Report: net.py');
    assert.deepEqual(panel.options.localResourceRoots, []);
    assert.equal(panel.options.enableCommandUris, false);
    assert.equal(panel.webview.html, `<html><body>report for ${uri.toString()}</body></html>`);
    await view.show();
    assert.equal(stub.panels.length, 1, 'reused');
    assert.equal(panel.revealed, 1);
    assert.deepEqual(asked, [uri.toString(), uri.toString()]);
  });

  test('no Python editor: the report of every open file', async () => {
    await view.show();
    assert.deepEqual(asked, [null]);
    assert.equal(stub.panels[0].title, 'Compile Report');
  });

  test("a card's Details link: the page of that file, opened at the target", async () => {
    await view.show('file:///work/project/net.py', 'Net');
    assert.deepEqual(asked, [['file:///work/project/net.py', 'Net']]);
    assert.equal(stub.panels[0].title, 'Compile Report: net.py');
  });

  test('a click in the page opens the location', async () => {
    await view.show('file:///work/project/net.py');
    await stub.panels[0].post({ type: 'open', path: '/work/project/helpers.py', line: 4, column: 12 });
    assert.deepEqual(stub.shown.map((s) => [s.path, s.line, s.character]), [['/work/project/helpers.py', 3, 11]]);
  });

  test('no server: the panel says so instead of staying blank', async () => {
    stub.registered.delete(REPORT_HTML);
    await view.show('file:///work/project/net.py');
    assert.match(stub.panels[0].webview.html, /server is not running/);
  });

  test('a closed panel is made again', async () => {
    await view.show('file:///a.py');
    stub.panels[0].dispose();
    await view.show('file:///a.py');
    assert.equal(stub.panels.length, 2);
  });
});

describe('hover links to the report', () => {
  beforeEach(resetStubs);
  afterEach(async () => {
    await deactivate();
  });

  test('cards that link the report are trusted for that command only', async () => {
    const card = new MarkdownString('### torch.compile\n\n[Open the compile report](command:compileLens.showReport)');
    const other = new MarkdownString('[run](command:workbench.action.terminal.new)');
    const hover = await hoverMiddleware.provideHover(
      {} as never, {} as never, {} as never,
      async () => new Hover([card, other, 'plain']) as never,
    );
    assert.ok(hover);
    assert.deepEqual(card.isTrusted, { enabledCommands: [SHOW_REPORT] });
    assert.equal(other.isTrusted, undefined);
  });

  test("a measured card's Details link, with its arguments, is trusted too", async () => {
    const args = encodeURIComponent(JSON.stringify(['file:///work/project/net.py', 'Net']));
    const card = new MarkdownString(`**not worth it**\n\n[Details](command:compileLens.showReport?${args})`);
    await hoverMiddleware.provideHover({} as never, {} as never, {} as never, async () => new Hover([card]) as never);
    assert.deepEqual(card.isTrusted, { enabledCommands: [SHOW_REPORT] });
  });

  test('the client uses the hover middleware and the command opens the panel', async () => {
    const context = fakeContext();
    await activate(context as never);
    const middleware = clients[clients.length - 1].clientOptions.middleware;
    assert.equal(typeof middleware.provideHover, 'function');
    assert.equal(typeof middleware.executeCommand, 'function');
    stub.registered.set(REPORT_HTML, () => ({ html: '<html>ok</html>' }));
    await stub.registered.get(SHOW_REPORT)?.();
    assert.equal(stub.panels.length, 1);
    assert.equal(stub.panels[0].webview.html, '<html>ok</html>');
    await deactivate();
    context.disposeAll();
    assert.ok(stub.panels[0].disposed);
  });
});
