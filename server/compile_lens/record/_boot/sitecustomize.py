"""Put on PYTHONPATH by `compile-lens record`: installs the recorder, then runs any other sitecustomize.

Stdlib only until the recorder is imported; never raises (a failure is noted, the program runs on).
"""

import os
import sys


def _start() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    me = sys.modules.get(__name__)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    lib = os.environ.get("COMPILE_LENS_RECORD_LIB")
    try:
        if lib and lib not in sys.path:
            sys.path.append(lib)
        from compile_lens.record import hook

        hook.install()
        # Hooks a launcher on a higher floor adds beside the recorder (`compile-lens trial` names
        # `compile_lens.trial.hook`: steps, times, losses): the recorder does not know them.
        hooks = [h for h in os.environ.get("COMPILE_LENS_BOOT_HOOKS", "").split(",") if h]
        if hooks:
            import importlib

            for name in hooks:
                importlib.import_module(name).install()
    except Exception as exc:  # noqa: BLE001 - the user's program must run regardless
        out = os.environ.get("COMPILE_LENS_RECORD_OUT")
        try:
            if out:
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with open(os.path.join(os.path.dirname(out), "record.log"), "a", encoding="utf-8") as f:
                    f.write(f"{os.getpid()}: the recorder did not start in {sys.executable}: {type(exc).__name__}: {exc}\n")
        except OSError:
            pass
    # The sitecustomize this one hides (Debian's, a virtualenv's), as if ours were not there.
    sys.modules.pop(__name__, None)
    try:
        import sitecustomize  # noqa: F401
    except ImportError:
        pass
    except Exception:  # noqa: BLE001 - as site.py would: report and go on
        import traceback

        traceback.print_exc()
    finally:
        if __name__ not in sys.modules and me is not None:
            sys.modules[__name__] = me


_start()
