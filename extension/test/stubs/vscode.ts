// The part of the `vscode` API the client uses, in memory, with knobs for the tests (`stub`).
import * as path from 'path';

type Listener<T> = (value: T) => unknown;

export class EventEmitter<T> {
  private listeners: Listener<T>[] = [];
  event = (listener: Listener<T>): Disposable => {
    this.listeners.push(listener);
    return new Disposable(() => {
      this.listeners = this.listeners.filter((l) => l !== listener);
    });
  };
  fire(value: T): void {
    for (const listener of [...this.listeners]) {
      listener(value);
    }
  }
  dispose(): void {
    this.listeners = [];
  }
}

export class Disposable {
  constructor(private readonly callOnDispose: () => void) {}
  dispose(): void {
    this.callOnDispose();
  }
}

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly fsPath: string,
  ) {}
  static file(p: string): Uri {
    return new Uri('file', path.resolve(p));
  }
  static parse(text: string): Uri {
    const match = /^([a-z][\w+.-]*):\/\/(.*)$/i.exec(text);
    return match ? new Uri(match[1], match[2]) : new Uri('file', text);
  }
  /** A URI from its parts (the query kept, as VS Code's): a provider's document. */
  static from(parts: { scheme: string; path: string; query?: string }): Uri {
    const uri = new Uri(parts.scheme, parts.path);
    (uri as { query: string }).query = parts.query ?? '';
    return uri;
  }
  readonly query: string = '';
  toString(): string {
    return `${this.scheme}://${this.fsPath}`;
  }
}

export class Position {
  constructor(
    readonly line: number,
    readonly character: number,
  ) {}
}

export class Range {
  constructor(
    readonly start: Position,
    readonly end: Position,
  ) {}
}

export enum ViewColumn {
  Active = -1,
  Beside = -2,
  One = 1,
  Two = 2,
}

export class MarkdownString {
  isTrusted?: boolean | { readonly enabledCommands: readonly string[] };
  constructor(public value = '') {}
}

export class Hover {
  constructor(readonly contents: (MarkdownString | string)[]) {}
}

/** A webview panel as the report uses it; `post` plays the page sending a message. */
export class FakeWebviewPanel {
  title: string;
  disposed = false;
  revealed = 0;
  private messageListeners: Listener<unknown>[] = [];
  private disposeListeners: Listener<void>[] = [];
  readonly webview = {
    html: '',
    onDidReceiveMessage: (listener: Listener<unknown>) => {
      this.messageListeners.push(listener);
      return new Disposable(() => undefined);
    },
  };
  constructor(
    readonly viewType: string,
    title: string,
    readonly showOptions: unknown,
    readonly options: Record<string, unknown>,
  ) {
    this.title = title;
  }
  reveal(): void {
    this.revealed += 1;
  }
  onDidDispose(listener: Listener<void>): Disposable {
    this.disposeListeners.push(listener);
    return new Disposable(() => undefined);
  }
  dispose(): void {
    this.disposed = true;
    for (const listener of this.disposeListeners) {
      listener(undefined);
    }
  }
  async post(message: unknown): Promise<unknown[]> {
    return Promise.all(this.messageListeners.map((listener) => listener(message)));
  }
}

export enum LanguageStatusSeverity {
  Information = 0,
  Warning = 1,
  Error = 2,
}

export interface WorkspaceFolder {
  uri: Uri;
  name: string;
  index: number;
}

export interface FakeLanguageStatusItem {
  id: string;
  selector: unknown;
  name?: string;
  text: string;
  detail?: string;
  severity: LanguageStatusSeverity;
  busy: boolean;
  command?: unknown;
  disposed: boolean;
  dispose(): void;
}

export interface FakeLogChannel {
  name: string;
  lines: string[];
  shown: number;
}

/** Test knobs and records. `reset()` before each test. */
export const stub = {
  /** Setting values by full key, e.g. 'compileLens.device'. */
  config: {} as Record<string, unknown>,
  /** Defaults by full key (what package.json contributes). */
  defaults: {} as Record<string, unknown>,
  extensions: {} as Record<string, { isActive: boolean; exports: unknown; activate(): Promise<unknown> }>,
  /** The button the next showErrorMessage "clicks" (undefined: dismissed). */
  nextChoice: undefined as string | undefined,
  messages: [] as { level: string; text: string; items: string[] }[],
  executed: [] as { command: string; args: unknown[] }[],
  registered: new Map<string, (...args: unknown[]) => unknown>(),
  statusItems: [] as FakeLanguageStatusItem[],
  channels: [] as FakeLogChannel[],
  configChange: new EventEmitter<{ affectsConfiguration(section: string): boolean }>(),
  grantTrust: new EventEmitter<void>(),
  panels: [] as FakeWebviewPanel[],
  /** Documents shown with showTextDocument: path and the selection's start. */
  shown: [] as { path: string; line: number; character: number; viewColumn: unknown }[],
  /** Files openTextDocument refuses (a missing file). */
  unreadable: new Set<string>(),
  /** Text document content providers by scheme. */
  providers: new Map<string, { provideTextDocumentContent(uri: Uri): Promise<string> | string }>(),
  reset(): void {
    this.providers = new Map();
    this.config = {};
    this.defaults = {};
    this.extensions = {};
    this.nextChoice = undefined;
    this.messages = [];
    this.executed = [];
    this.registered = new Map();
    this.statusItems = [];
    this.channels = [];
    this.configChange = new EventEmitter();
    this.grantTrust = new EventEmitter();
    this.panels = [];
    this.shown = [];
    this.unreadable = new Set();
    workspace.isTrusted = true;
    workspace.workspaceFolders = [{ uri: Uri.file('/work/project'), name: 'project', index: 0 }];
    window.activeTextEditor = undefined;
  },
  /** Changes settings and fires onDidChangeConfiguration for them, as VS Code does. */
  changeConfig(values: Record<string, unknown>): void {
    Object.assign(this.config, values);
    const keys = Object.keys(values);
    this.configChange.fire({
      affectsConfiguration: (section: string) =>
        keys.some((key) => key === section || key.startsWith(`${section}.`)),
    });
  },
};

export const workspace = {
  isTrusted: true,
  workspaceFolders: undefined as WorkspaceFolder[] | undefined,
  getConfiguration(section: string, _scope?: unknown) {
    return {
      get<T>(key: string, fallback?: T): T | undefined {
        const full = `${section}.${key}`;
        if (full in stub.config) {
          return stub.config[full] as T;
        }
        if (full in stub.defaults) {
          return stub.defaults[full] as T;
        }
        return fallback;
      },
    };
  },
  onDidChangeConfiguration: (listener: Listener<{ affectsConfiguration(s: string): boolean }>) =>
    stub.configChange.event(listener),
  onDidGrantWorkspaceTrust: (listener: Listener<void>) => stub.grantTrust.event(listener),
  async openTextDocument(uri: Uri) {
    if (stub.unreadable.has(uri.fsPath)) {
      throw new Error(`cannot open ${uri.fsPath}`);
    }
    const provider = stub.providers.get(uri.scheme);
    return provider ? { uri, text: await provider.provideTextDocumentContent(uri) } : { uri };
  },
  registerTextDocumentContentProvider(
    scheme: string,
    provider: { provideTextDocumentContent(uri: Uri): Promise<string> | string },
  ): Disposable {
    stub.providers.set(scheme, provider);
    return new Disposable(() => stub.providers.delete(scheme));
  },
};

function logChannel(name: string) {
  const record: FakeLogChannel = { name, lines: [], shown: 0 };
  stub.channels.push(record);
  const line = (level: string) => (message: string) => {
    record.lines.push(`[${level}] ${message}`);
  };
  return {
    name,
    logLevel: 2,
    trace: line('trace'),
    debug: line('debug'),
    info: line('info'),
    warn: line('warn'),
    error: line('error'),
    append: line('append'),
    appendLine: line('line'),
    replace: line('replace'),
    clear: () => undefined,
    show: () => {
      record.shown += 1;
    },
    hide: () => undefined,
    dispose: () => undefined,
    onDidChangeLogLevel: new EventEmitter<number>().event,
  };
}

export const window = {
  activeTextEditor: undefined as { document: { uri: Uri; languageId?: string } } | undefined,
  createWebviewPanel(viewType: string, title: string, showOptions: unknown, options: Record<string, unknown>) {
    const panel = new FakeWebviewPanel(viewType, title, showOptions, options);
    stub.panels.push(panel);
    return panel;
  },
  async showTextDocument(
    document: { uri: Uri },
    options: { selection?: Range; viewColumn?: unknown; preview?: boolean } = {},
  ) {
    const start = options.selection?.start ?? new Position(0, 0);
    stub.shown.push({ path: document.uri.fsPath, line: start.line, character: start.character, viewColumn: options.viewColumn });
    return {};
  },
  createOutputChannel: (name: string, _options?: { log: true }) => logChannel(name),
  async showErrorMessage(text: string, ...items: string[]) {
    stub.messages.push({ level: 'error', text, items });
    return stub.nextChoice;
  },
  async showWarningMessage(text: string, ...items: string[]) {
    stub.messages.push({ level: 'warning', text, items });
    return undefined;
  },
  async showInformationMessage(text: string, ...items: string[]) {
    stub.messages.push({ level: 'info', text, items });
    return undefined;
  },
};

export const languages = {
  createLanguageStatusItem(id: string, selector: unknown): FakeLanguageStatusItem {
    const item: FakeLanguageStatusItem = {
      id,
      selector,
      text: '',
      severity: LanguageStatusSeverity.Information,
      busy: false,
      disposed: false,
      dispose() {
        item.disposed = true;
      },
    };
    stub.statusItems.push(item);
    return item;
  },
};

export const commands = {
  registerCommand(command: string, callback: (...args: unknown[]) => unknown): Disposable {
    if (stub.registered.has(command)) {
      throw new Error(`command '${command}' already exists`);
    }
    stub.registered.set(command, callback);
    return new Disposable(() => stub.registered.delete(command));
  },
  async executeCommand(command: string, ...args: unknown[]): Promise<unknown> {
    stub.executed.push({ command, args });
    return stub.registered.get(command)?.(...args);
  },
};

export const extensions = {
  getExtension(id: string) {
    return stub.extensions[id];
  },
};

stub.reset();
