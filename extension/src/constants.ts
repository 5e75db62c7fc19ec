// Every id the client shares with package.json and the server: command ids, custom
// notifications, the language client's id and name, the settings section.

export const CLIENT_ID = 'compileLens';
export const CLIENT_NAME = 'Compile Lens';
export const SECTION = 'compileLens';

/** Commands the server executes (vscode-languageclient registers them from its executeCommandProvider). */
export const ANALYZE_FILE = 'compileLens.analyzeFile';
export const MEASURE = 'compileLens.measure';
export const MEASURE_ANYWAY = 'compileLens.measureAnyway';
export const CLEAR_CACHE = 'compileLens.clearCache';
export const SAVE_TRACE = 'compileLens.saveTrace';
export const REPORT_HTML = 'compileLens.reportHtml';
export const IMPORT_TRACE = 'compileLens.importTrace';
export const CLEAR_IMPORTED_TRACE = 'compileLens.clearImportedTrace';
export const CAPTURED_GRAPH = 'compileLens.capturedGraph';
export const KERNELS_AT = 'compileLens.kernelsAt';

/** Commands this extension registers and runs itself. */
export const RESTART_SERVER = 'compileLens.restartServer';
export const SHOW_OUTPUT = 'compileLens.showOutput';
export const SHOW_REPORT = 'compileLens.showReport';
export const COMPARE_TORCH = 'compileLens.compareTorch';
export const SHOW_CAPTURED_GRAPH = 'compileLens.showCapturedGraph';
export const SHOW_KERNELS = 'compileLens.showKernels';

/** The scheme of the read-only documents of captured graphs (capturedGraph.ts). */
export const GRAPH_SCHEME = 'compile-lens';

/**
 * The client's own commands that the server may put in lenses and hovers, sent as the
 * `clientCommands` initialization option: only then does the server use them. Other LSP clients
 * get commands the server executes instead.
 */
export const CLIENT_COMMANDS: readonly string[] = [SHOW_OUTPUT, SHOW_REPORT, SHOW_CAPTURED_GRAPH, SHOW_KERNELS];

/** Server commands that act on a file: from the palette they get the active editor's. */
export const FILE_COMMANDS: ReadonlySet<string> = new Set([ANALYZE_FILE, MEASURE, SAVE_TRACE]);

/** The server's `compileLens/status` notification (status.ts). */
export const STATUS_NOTIFICATION = 'compileLens/status';
/** The language status item's id. */
export const STATUS_ITEM = 'compileLens.status';
/** The compile report's webview type (report.ts). */
export const REPORT_VIEW_TYPE = 'compileLens.report';
