// The "Compile Lens" language status item, fed by the server's `compileLens/status` notification,
// and the one-time "no torch" notification.
import * as vscode from 'vscode';
import { MEASURE_ANYWAY, SECTION, SHOW_OUTPUT, STATUS_ITEM } from './constants';

export type ServerState =
  | 'starting'
  | 'idle'
  | 'tracing'
  | 'benchmarking'
  | 'waiting'
  | 'error'
  | 'restricted'
  | 'no-torch'
  | 'stopped';

export interface StatusParams {
  state: ServerState;
  detail?: string;
  torch?: string | null;
  device?: string | null;
  interpreter?: string;
}

const BUSY: ReadonlySet<ServerState> = new Set(['starting', 'tracing', 'benchmarking']);
/** States whose detail names what is being worked on ("tracing Net") or waited for. */
const ACTIVITY: ReadonlySet<ServerState> = new Set(['starting', 'tracing', 'benchmarking', 'waiting']);

/**
 * The short text: `Compile Lens: tracing Net`, `Compile Lens: idle`, `Compile Lens: no torch`,
 * `Compile Lens: waiting: GPU busy (python train.py, 92%)`.
 */
export function statusText(params: StatusParams): string {
  const state = params.state.replace('-', ' ');
  const detail = params.detail?.trim() ?? '';
  let what = state;
  if (detail && params.state === 'waiting') {
    what = `waiting: ${detail}`;
  } else if (detail && ACTIVITY.has(params.state)) {
    what = detail.toLowerCase().startsWith(state) ? detail : `${state} ${detail}`;
  }
  return `Compile Lens: ${what}`;
}

/** The second line: `torch 2.13.0+cpu · cpu`, plus the detail where the text does not carry it. */
export function statusDetail(params: StatusParams): string {
  const parts: string[] = [];
  if (params.detail && !ACTIVITY.has(params.state)) {
    parts.push(params.detail);
  }
  if (params.torch) {
    parts.push(`torch ${params.torch}`);
  }
  if (params.device) {
    parts.push(params.device);
  }
  return parts.join(' · ');
}

export function statusSeverity(state: ServerState): vscode.LanguageStatusSeverity {
  if (state === 'error' || state === 'no-torch') {
    return vscode.LanguageStatusSeverity.Error;
  }
  if (state === 'restricted' || state === 'stopped') {
    return vscode.LanguageStatusSeverity.Warning;
  }
  return vscode.LanguageStatusSeverity.Information;
}

export class Status implements vscode.Disposable {
  private readonly item: vscode.LanguageStatusItem;
  /** The interpreter the no-torch notification was last shown for. */
  private noTorchShownFor: string | undefined;
  last: StatusParams | undefined;

  constructor(private readonly log: vscode.LogOutputChannel) {
    this.item = vscode.languages.createLanguageStatusItem(STATUS_ITEM, {
      language: 'python',
    });
    this.item.name = 'Compile Lens';
    this.update({ state: 'starting', detail: 'server' });
  }

  update(params: StatusParams): void {
    this.last = params;
    this.item.text = statusText(params);
    this.item.detail = statusDetail(params);
    this.item.severity = statusSeverity(params.state);
    this.item.busy = BUSY.has(params.state);
    // while a measurement waits for a busy GPU, the item's link lets it go
    this.item.command =
      params.state === 'waiting'
        ? { title: 'Measure anyway', command: MEASURE_ANYWAY }
        : { title: 'Show Output', command: SHOW_OUTPUT };
    if (params.state === 'no-torch') {
      void this.noTorch(params.interpreter ?? 'unknown');
    }
  }

  /** Shown once per interpreter, however often the server reports it. */
  private async noTorch(interpreter: string): Promise<void> {
    if (this.noTorchShownFor === interpreter) {
      return;
    }
    this.noTorchShownFor = interpreter;
    const pick = 'Select Interpreter';
    const message =
      `Compile Lens: the selected interpreter (${interpreter}) has no torch. ` +
      'Pick an interpreter with PyTorch installed.';
    this.log.error(message);
    const choice = await vscode.window.showErrorMessage(message, pick);
    if (choice !== pick) {
      return;
    }
    if (vscode.extensions.getExtension('ms-python.python')) {
      await vscode.commands.executeCommand('python.setInterpreter');
    } else {
      await vscode.commands.executeCommand(
        'workbench.action.openSettings',
        `${SECTION}.interpreter`,
      );
    }
  }

  dispose(): void {
    this.item.dispose();
  }
}
