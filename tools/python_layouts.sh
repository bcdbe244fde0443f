#!/bin/sh
# python_layouts.sh - writes src/agent/symbols/python_layouts.h, CPython's
# structure offsets for 3.8 to 3.13, or checks one version's part of it.
#
#   tools/python_layouts.sh [OUTPUT]
#   tools/python_layouts.sh --check VERSION LAYOUTS_H [INCLUDE_DIR]
#
# The first form compiles tools/python_layout_gen.c against each version's
# headers and writes the tables (OUTPUT defaults to the committed file); it
# needs all six versions and says which it took from where.  The second
# (the python_layout_3_X tests) compiles the generator against VERSION's
# headers and compares what it prints with that version's tables in
# LAYOUTS_H; it exits 77 when the headers are not on this machine.
#
# The headers are pyenv's: the newest VERSION.N under `pyenv root`,
# $PYENV_ROOT or ~/.pyenv (in that order) whose include/pythonVERSION has the
# internal/ headers; INCLUDE_DIR names another (/usr/include/python3.11).
# CC is the compiler (cc by default).
#
# One exception: 3.8, 3.9 and 3.10 install no header that defines
# PyDictKeysObject and PyDictKeyEntry (they are in CPython's
# Objects/dict-common.h), so for those versions the offsets of dk_size,
# dk_nentries, dk_indices, me_key and me_value and the entry's size come from
# the build's debug info: gdb reads them from the DWARF of the libpython (or
# python executable) beside the headers, PREFIX/lib for PREFIX/include/
# pythonVERSION, and they reach the generator as -DHW_DWARF_* definitions.
# Without gdb or that DWARF, --check skips (77) those versions and the first
# form fails.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
versions="3.8 3.9 3.10 3.11 3.12 3.13"
CC=${CC:-cc}

pyenv_root() {
    if command -v pyenv >/dev/null 2>&1 && pyenv root 2>/dev/null; then
        return 0
    fi
    echo "${PYENV_ROOT:-$HOME/.pyenv}"
}

# headers_of VERSION: the include directory of pyenv's newest VERSION.N, or
# nothing.
headers_of() {
    root=$(pyenv_root)
    newest=$(for d in "$root"/versions/"$1".*; do
        [ -d "$d/include/python$1/internal" ] && echo "${d##*/}"
    done | sort -t. -k3,3n | tail -n 1)
    if [ -n "$newest" ]; then
        echo "$root/versions/$newest/include/python$1"
    fi
}

# dwarf VERSION INCLUDE_DIR: for 3.8-3.10, sets dwarf_defs to the -D
# definitions of the dict keys' and entries' offsets (and, for the
# generator's checks, their fields' sizes and sizeof(PyInterpreterState)),
# read with gdb from the DWARF of the build the headers belong to; returns 1
# with dwarf_missing saying what is not there.  For 3.11+ (whose
# internal/pycore_dict.h has them) dwarf_defs is empty.
dwarf() {
    dwarf_defs="" dwarf_missing=""
    case $1 in 3.8 | 3.9 | 3.10) ;; *) return 0 ;; esac
    if ! command -v gdb >/dev/null 2>&1; then
        dwarf_missing="gdb"
        return 1
    fi
    dwarf_prefix=${2%/}
    dwarf_prefix=${dwarf_prefix%/include/python"$1"}
    dwarf_lib=""
    for f in "$dwarf_prefix/lib/libpython$1.so.1.0" "$dwarf_prefix/lib/libpython$1.so" \
        "$dwarf_prefix"/lib/*/libpython"$1".so.1.0 "$dwarf_prefix/bin/python$1"; do
        if [ -f "$f" ]; then
            dwarf_lib=$f
            break
        fi
    done
    if [ -z "$dwarf_lib" ]; then
        dwarf_missing="its libpython (looked for $dwarf_prefix/lib/libpython$1.so.1.0 and $dwarf_prefix/bin/python$1)"
        return 1
    fi
    k='((struct _dictkeysobject *)0)' e='((PyDictKeyEntry *)0)'
    dwarf_out=$(gdb -batch -nx -iex 'set debuginfod enabled off' \
        -ex "printf \"-DHW_DWARF_KEYS_SIZE=%lu\\n\", (unsigned long)&$k->dk_size" \
        -ex "printf \"-DHW_DWARF_KEYS_SIZE_BYTES=%lu\\n\", (unsigned long)sizeof($k->dk_size)" \
        -ex "printf \"-DHW_DWARF_KEYS_NENTRIES=%lu\\n\", (unsigned long)&$k->dk_nentries" \
        -ex "printf \"-DHW_DWARF_KEYS_NENTRIES_BYTES=%lu\\n\", (unsigned long)sizeof($k->dk_nentries)" \
        -ex "printf \"-DHW_DWARF_KEYS_INDICES=%lu\\n\", (unsigned long)&$k->dk_indices" \
        -ex "printf \"-DHW_DWARF_ENTRY_SIZE=%lu\\n\", (unsigned long)sizeof(PyDictKeyEntry)" \
        -ex "printf \"-DHW_DWARF_ENTRY_KEY=%lu\\n\", (unsigned long)&$e->me_key" \
        -ex "printf \"-DHW_DWARF_ENTRY_KEY_BYTES=%lu\\n\", (unsigned long)sizeof($e->me_key)" \
        -ex "printf \"-DHW_DWARF_ENTRY_VALUE=%lu\\n\", (unsigned long)&$e->me_value" \
        -ex "printf \"-DHW_DWARF_ENTRY_VALUE_BYTES=%lu\\n\", (unsigned long)sizeof($e->me_value)" \
        -ex "printf \"-DHW_DWARF_INTERP_SIZE=%lu\\n\", (unsigned long)sizeof(struct _is)" \
        "$dwarf_lib" 2>&1) || true
    dwarf_re='^-DHW_DWARF_[A-Z_]+=[0-9]+$'
    dwarf_defs=$(printf '%s\n' "$dwarf_out" | grep -E "$dwarf_re" | tr '\n' ' ')
    if [ "$(printf '%s\n' "$dwarf_out" | grep -cE "$dwarf_re")" -ne 11 ]; then
        dwarf_defs=""
        dwarf_missing="the debug info (DWARF) of $dwarf_lib with struct _dictkeysobject and PyDictKeyEntry"
        dwarf_missing="$dwarf_missing (gdb: $(printf '%s\n' "$dwarf_out" | grep -vE "$dwarf_re" | head -n 1))"
        return 1
    fi
}

# generate INCLUDE_DIR [DEFINITIONS]: what the generator prints when compiled
# against it, with DEFINITIONS (-D..., split on blanks) given to the compiler
# (shell variables are global: its own are gen_*).
generate() {
    gen_dir=$(mktemp -d)
    # shellcheck disable=SC2086 # the definitions are words
    if ! $CC -std=c11 -Wall -Wextra -Werror ${2:-} -I "$top/src" -I "$1" "$here/python_layout_gen.c" -o "$gen_dir/gen" >&2 ||
        ! "$gen_dir/gen"; then
        rm -rf "$gen_dir"
        echo "python_layouts: the generator failed against $1" >&2
        return 1
    fi
    rm -rf "$gen_dir"
}

# tables VERSION [layout|debug|all]: from standard input, VERSION's
# initializers ("3.11": hw_python_layout_3_11, hw_python_debug_layout_3_11),
# each with the comment line before it (which names the headers' patch level).
tables() {
    awk -v v="$(echo "$1" | tr . _)" -v which="${2:-all}" '
        /^\/\* / { comment = $0; next }
        $0 ~ ("^static const hw_python_layout hw_python_layout_" v " = [{]$") && which != "debug" { on = 1 }
        $0 ~ ("^static const hw_python_debug_layout hw_python_debug_layout_" v " = [{]$") && which != "layout" { on = 1 }
        on == 1 { print comment; on = 2 }
        on { print }
        on && /^};$/ { on = 0; print "" }'
}

check() {
    version=$1 layouts=$2 include=${3:-}
    if [ -z "$include" ]; then
        include=$(headers_of "$version")
        if [ -z "$include" ]; then
            echo "python_layouts: CPython $version's headers are not on this machine" \
                "(looked for $(pyenv_root)/versions/$version.*/include/python$version/internal): skipped" >&2
            exit 77
        fi
    elif [ ! -d "$include/internal" ]; then
        echo "python_layouts: CPython $version's headers are not on this machine ($include/internal): skipped" >&2
        exit 77
    fi
    if ! dwarf "$version" "$include"; then
        echo "python_layouts: CPython $version's dict keys and entries are in no installed header and" \
            "$dwarf_missing is not on this machine: skipped" >&2
        exit 77
    fi
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    generate "$include" "$dwarf_defs" >"$tmp/printed"
    tables "$version" <"$tmp/printed" | grep -v '^/\*' >"$tmp/headers"
    tables "$version" <"$layouts" | grep -v '^/\*' >"$tmp/committed"
    if [ ! -s "$tmp/headers" ]; then
        echo "python_layouts: no table for $version from $include" >&2
        exit 1
    fi
    if ! diff -u "$tmp/committed" "$tmp/headers"; then
        echo "python_layouts: CPython $version's table in $layouts differs from $include's headers" \
            "(above: - committed, + headers); run tools/python_layouts.sh" >&2
        exit 1
    fi
    echo "python_layouts: CPython $version's table matches $include's headers"
}

write_all() {
    out=${1:-$top/src/agent/symbols/python_layouts.h}
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    missing=""
    for v in $versions; do
        include=$(headers_of "$v")
        if [ -z "$include" ]; then
            missing="$missing $v"
            continue
        fi
        if ! dwarf "$v" "$include"; then
            echo "python_layouts: CPython $v's dict keys and entries are in no installed header," \
                "and $dwarf_missing is not on this machine: $out not written" >&2
            exit 1
        fi
        if [ -n "$dwarf_defs" ]; then
            echo "python_layouts: $v from $include, its dict keys and entries from $dwarf_lib's DWARF" >&2
        else
            echo "python_layouts: $v from $include" >&2
        fi
        generate "$include" "$dwarf_defs" >"$tmp/$v"
    done
    if [ -n "$missing" ]; then
        echo "python_layouts: no headers for$missing under $(pyenv_root)/versions: $out not written" >&2
        exit 1
    fi
    {
        cat <<'EOF'
/*
 * python_layouts.h - CPython's structure offsets for 3.8 to 3.13: one
 * hw_python_layout table per version (python_layout.h says what each field
 * is) and, for 3.13, the hw_python_debug_layout table.
 *
 * Generated, do not edit: tools/python_layouts.sh compiles
 * tools/python_layout_gen.c against each version's headers and writes this
 * file.  One exception to the headers: 3.8, 3.9 and 3.10 install none that
 * defines PyDictKeysObject or PyDictKeyEntry (CPython keeps them in
 * Objects/dict-common.h), so their keys_size, keys_nentries, keys_indices,
 * entry_size, entry_key and entry_value come from the build's debug info,
 * read with gdb from the DWARF of the libpython beside the headers.  Run
 *
 *   tools/python_layouts.sh
 *
 * after changing either.  The python_layout_3_X tests (ctest) build the
 * generator again against the headers (and for 3.8-3.10 the DWARF) a
 * machine has and compare.
 */
#ifndef HANGWATCH_PYTHON_LAYOUTS_H
#define HANGWATCH_PYTHON_LAYOUTS_H

#include "python_layout.h"

EOF
        for v in $versions; do
            tables "$v" layout <"$tmp/$v"
        done
        echo "/* Every version's table, oldest first. */"
        echo "static const hw_python_layout *const hw_python_layouts[] = {"
        for v in $versions; do
            echo "    &hw_python_layout_$(echo "$v" | tr . _),"
        done
        echo "};"
        echo
        for v in $versions; do
            tables "$v" debug <"$tmp/$v"
        done
        echo "#endif"
    } >"$tmp/out"
    mv "$tmp/out" "$out"
    echo "python_layouts: wrote $out" >&2
}

if [ "${1:-}" = "--check" ]; then
    [ $# -ge 3 ] || { echo "usage: $0 --check VERSION LAYOUTS_H [INCLUDE_DIR]" >&2; exit 2; }
    shift
    check "$@"
else
    write_all "$@"
fi
