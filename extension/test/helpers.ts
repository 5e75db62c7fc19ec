import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { stub } from './stubs/vscode';
import { clients } from './stubs/languageclient';

/** The repository root (bundles run from extension/out/test/). */
export const ROOT = path.resolve(__dirname, '..', '..', '..');

export const packageJSON = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));

/** Fresh stubs, with package.json's defaults as the settings' defaults. */
export function resetStubs(): void {
  stub.reset();
  clients.length = 0;
  const properties = packageJSON.contributes.configuration.properties as Record<
    string,
    { default?: unknown }
  >;
  for (const [key, schema] of Object.entries(properties)) {
    stub.defaults[key] = schema.default;
  }
}

export function fakeContext(extensionPath = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-ext-'))) {
  const subscriptions: { dispose(): unknown }[] = [];
  return {
    subscriptions,
    extensionPath,
    extension: { packageJSON },
    disposeAll(): void {
      for (const item of subscriptions.splice(0)) {
        item.dispose();
      }
    },
  };
}

/** Lets pending promise callbacks and timers of `ms` run. */
export function settle(ms = 0): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A fake ms-python.python whose active environment is `executable`. */
export function installPythonExtension(executable: string | undefined, opts: { fail?: boolean } = {}) {
  const listeners: (() => void)[] = [];
  const api = {
    environments: {
      getActiveEnvironmentPath: () => ({ id: 'active', path: executable ?? '' }),
      resolveEnvironment: async (env: { path: string }) => {
        if (opts.fail) {
          throw new Error('resolve failed');
        }
        return executable ? { executable: { uri: { fsPath: env.path } } } : undefined;
      },
      onDidChangeActiveEnvironmentPath: (listener: () => void) => {
        listeners.push(listener);
        return { dispose: () => undefined };
      },
    },
  };
  const extension = {
    isActive: false,
    exports: api,
    async activate() {
      extension.isActive = true;
      return api;
    },
  };
  stub.extensions['ms-python.python'] = extension;
  return {
    select(next: string) {
      executable = next;
      for (const listener of listeners) {
        listener();
      }
    },
  };
}
