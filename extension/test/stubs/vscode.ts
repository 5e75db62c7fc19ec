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
  toString(): string {
    return `${this.scheme}://${this.fsPath}`;
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
  reset(): void {
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
  activeTextEditor: undefined as { document: { uri: Uri } } | undefined,
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
