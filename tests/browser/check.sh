#!/usr/bin/env bash
# The browser test (issue 38, item 4) in one command: build the two Jupyter front-ends if they are missing, then run
# tests/browser/test_browser.py (pytest marker `browser`) from the JupyterLab environment, which also has Playwright.
#
#   tests/browser/check.sh            build what is missing, then run the test
#   tests/browser/check.sh --build    build (or rebuild) the environments only (--build-lab, --build-classic: one)
#   tests/browser/check.sh --run      run the test only (it skips, saying why, if an environment is missing)
#
# Environments (under .cache/browser/, ignored by git; no --system-site-packages):
#   lab      JupyterLab 4.x + ipywidgets 8.x + this package editable (pip install -e '.[dev,lab]'), the README's path
#   classic  Colab's widget stack: notebook 6.5.7, ipywidgets 7.7.1, widgetsnbextension 3.6.10, ipykernel 6.17.1,
#            jupyter_client 7.4.9 and every other package at the version ../shared/colab/pip-freeze.gpu.txt names
#            (torch excepted: torch==2.13.0, this machine's wheel); plus classic-js-3.6.6/, the classic front-end files
#            of widgetsnbextension 3.6.6 (see build_classic: 3.6.10's Output widget cannot be drawn in the page)
# Browser: Debian's chromium (apt-get install -y chromium), driven by Playwright for Python; never `playwright install`.
# Screenshots go to reports/browser/<front-end>/.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BASE=${BROWSER_ENVS:-$ROOT/.cache/browser}
PY=${BROWSER_PYTHON:-python3.11}
FREEZE=${COLAB_FREEZE:-$ROOT/../shared/colab/pip-freeze.gpu.txt}
TORCH=${BROWSER_TORCH:-torch==2.13.0}
mode=${1:-all}

log() { echo "[browser $(date +%H:%M:%S)] $*"; }

build_lab() {
  local t0=$SECONDS env=$BASE/lab
  rm -rf "$env" && "$PY" -m venv "$env"
  "$env/bin/python" -m pip install -q --upgrade pip
  "$env/bin/python" -m pip install -q "$TORCH"
  # the README's path (the `lab` extra) plus the dev tools; jupyterlab named too, in case the extra is older
  "$env/bin/python" -m pip install -q -e ".[dev,lab]" "jupyterlab>=4.2,<5" "ipywidgets>=8.1" "playwright>=1.40"
  "$env/bin/python" -m pip freeze > "$env/freeze.txt"
  "$env/bin/python" -m pip check
  log "lab built in $((SECONDS - t0)) s: $(grep -iE '^(jupyterlab|ipywidgets|playwright)==' "$env/freeze.txt" | tr '\n' ' ')"
}

build_classic() {
  local t0=$SECONDS env=$BASE/classic
  [ -f "$FREEZE" ] || { echo "no Colab package list at $FREEZE (set COLAB_FREEZE)"; exit 2; }
  rm -rf "$env" && "$PY" -m venv "$env"
  "$env/bin/python" -m pip install -q --upgrade pip
  "$env/bin/python" -m pip install -q "$TORCH"
  # Colab's versions as constraints: whatever pip installs here is at Colab's version if Colab ships it; except
  # torch, kept at the version just installed, and what torch itself requires (Colab's setuptools 75.2 is below
  # torch 2.13's floor, and pip would otherwise go back to an older torch, CUDA wheels and all)
  local torch_deps
  torch_deps=$("$env/bin/python" -c "import importlib.metadata as m, re
print('|'.join(re.sub(r'[-_.]', '[-_.]', re.split(r'[ ;<>=!~\\[]', r)[0]) for r in m.requires('torch') or []
               if 'extra ==' not in r))")
  grep -E '^[A-Za-z0-9_.-]+==' "$FREEZE" | grep -viE '^(torch|torchvision|torchaudio|torchao|triton|nvidia-)' \
    | grep -viE "^(${torch_deps})==" > "$env/colab-constraints.txt"
  "$env/bin/python" -c "import torch; print('torch==' + torch.__version__)" >> "$env/colab-constraints.txt"
  local stack="notebook==6.5.7 ipywidgets==7.7.1 widgetsnbextension==3.6.10 ipykernel==6.17.1 jupyter_client==7.4.9"
  # the package's own dependencies, read from pyproject.toml, ipywidgets left to the stack above; then the package
  # with --no-deps, so that its ipywidgets range (whatever it says today) cannot move the stack
  local deps
  deps=$("$env/bin/python" -c "import tomllib; d = tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']
print(' '.join(x for x in d if not x.lower().startswith(('ipywidgets', 'torch'))))")
  # shellcheck disable=SC2086
  "$env/bin/python" -m pip install -q -c "$env/colab-constraints.txt" $stack $deps pytest nbformat
  "$env/bin/python" -m pip install -q --no-deps -e .
  "$env/bin/python" -m pip freeze > "$env/freeze.txt"
  "$env/bin/python" -m pip check || true  # reported, not fatal: Colab itself ships a few unmet ranges
  # widgetsnbextension 3.6.8 to 3.6.10 (Colab's) ship a classic-notebook bundle whose Output widget cannot be created
  # (its Backbone-style model extends an ES2015 class: "_deserialize_state is not a function"); 3.6.6 is the last one
  # compiled to ES5. Its front-end files only (no Python package changes) go to $BASE/classic-js-3.6.6, which the test
  # serves as a second classic page ("classic_js366") on the same Python stack.
  local js=$BASE/classic-js-3.6.6 dl
  dl=$(mktemp -d)
  "$env/bin/python" -m pip download -q --no-deps "widgetsnbextension==3.6.6" -d "$dl"
  rm -rf "$js" && mkdir -p "$js/nbextensions"
  "$env/bin/python" -m zipfile -e "$dl"/widgetsnbextension-3.6.6-*.whl "$dl/x"
  cp -r "$dl"/x/widgetsnbextension-3.6.6.data/data/share/jupyter/nbextensions/jupyter-js-widgets "$js/nbextensions/"
  rm -rf "$dl"
  log "classic built in $((SECONDS - t0)) s: $(grep -iE '^(notebook|ipywidgets|widgetsnbextension|ipykernel|jupyter_client|traitlets|tornado)==' "$env/freeze.txt" | tr '\n' ' ')"
}

run_test() {
  local t0=$SECONDS
  BROWSER_ENVS=$BASE "$BASE/lab/bin/python" -m pytest tests/browser/test_browser.py -m browser -p no:cacheprovider -v "$@"
  log "browser test ran in $((SECONDS - t0)) s; screenshots in reports/browser/"
}

case $mode in
  --build) build_lab; build_classic ;;
  --build-lab) build_lab ;;
  --build-classic) build_classic ;;
  --run) shift; run_test "$@" ;;
  all)
    [ -x "$BASE/lab/bin/jupyter-lab" ] || build_lab
    [ -x "$BASE/classic/bin/jupyter-notebook" ] && [ -d "$BASE/classic-js-3.6.6" ] || build_classic
    run_test ;;
  *) echo "usage: $0 [--build | --run [pytest args]]"; exit 2 ;;
esac
