// Stands in for `vscode-languageclient/node`: records every client the code creates and what it
// is asked to do, and lets a test play the server (`emit`).
export enum State {
  Stopped = 1,
  Starting = 3,
  Running = 2,
}

export enum RevealOutputChannelOn {
  Debug = 0,
  Info = 1,
  Warn = 2,
  Error = 3,
  Never = 4,
}

export const DidChangeConfigurationNotification = {
  type: { method: 'workspace/didChangeConfiguration' },
};

/* eslint-disable @typescript-eslint/no-explicit-any */
export type LanguageClientOptions = any;
export type ServerOptions = any;
export type Middleware = any;

export const clients: LanguageClient[] = [];

export class LanguageClient {
  state = State.Stopped;
  started = 0;
  disposed = false;
  sent: { method: string; params: unknown }[] = [];
  private handlers = new Map<string, (params: any) => void>();
  private stateListeners: ((event: { oldState: State; newState: State }) => void)[] = [];

  constructor(
    readonly id: string,
    readonly name: string,
    readonly serverOptions: any,
    readonly clientOptions: any,
  ) {
    clients.push(this);
  }

  static failNextStart: Error | undefined;

  private setState(newState: State): void {
    const oldState = this.state;
    this.state = newState;
    for (const listener of this.stateListeners) {
      listener({ oldState, newState });
    }
  }

  async start(): Promise<void> {
    this.started += 1;
    const failure = LanguageClient.failNextStart;
    LanguageClient.failNextStart = undefined;
    if (failure) {
      this.setState(State.Stopped);
      throw failure;
    }
    this.setState(State.Running);
  }

  async stop(): Promise<void> {
    this.setState(State.Stopped);
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    if (this.state !== State.Stopped) {
      this.setState(State.Stopped);
    }
  }

  needsStop(): boolean {
    return this.state !== State.Stopped;
  }

  isRunning(): boolean {
    return this.state === State.Running;
  }

  onNotification(method: string, handler: (params: any) => void) {
    this.handlers.set(method, handler);
    return { dispose: () => this.handlers.delete(method) };
  }

  onDidChangeState(listener: (event: { oldState: State; newState: State }) => void) {
    this.stateListeners.push(listener);
    return { dispose: () => undefined };
  }

  async sendNotification(type: { method: string }, params: unknown): Promise<void> {
    this.sent.push({ method: type.method, params });
  }

  /** Plays the server sending a notification. */
  emit(method: string, params: unknown): void {
    this.handlers.get(method)?.(params);
  }
}
