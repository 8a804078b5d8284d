#!/usr/bin/env bash
# layering.sh [LIB] - check the dependency rule between lib/'s folders
# (docs/ARCHITECTURE.md, "The dependency rule"): every `#include "x.h"`
# of a file under LIB (default: this checkout's lib/) must name a header
# of its own folder or of a folder its folder may use:
#
#   common                    nothing else
#   format                    common
#   capture/*                 common, format's writers (never its reader:
#                             mt_input.h)
#   preload                   capture/recorder/mt_fast.h alone
#   analysis                  common, format
#   report                    common, format, analysis
#
# capture's sub-folders count as one folder here.  Headers found nowhere
# in LIB (bpf/, generated ones, the system's) are not checked.  A header
# name found in two folders is an error too: which one an include gets
# would depend on the order of -I.  Prints each violation; exit 1 if any.
set -euo pipefail

lib=${1:-"$(cd "$(dirname "$0")/.." && pwd)/lib"}
cd "$lib"

# the folders a folder may include from (its own always): folder names,
# or single headers as folder/name.h
declare -A may_use=(
	[common]="common"
	[format]="common format"
	[capture]="common format capture"
	[preload]="preload capture/recorder/mt_fast.h"
	[analysis]="common format analysis"
	[report]="common format analysis report"
)
# and the headers a folder must not include even so: capture writes the
# raw stream (mt_raw.h, rawpack.h), it never reads a format
declare -A must_not=(
	[capture]="format/mt_input.h format/input_int.h"
)

declare -A home=()
bad=0
while IFS= read -r h; do
	name=${h##*/}
	if [ -n "${home[$name]:-}" ]; then
		echo "layering: $name is in lib/${home[$name]} and lib/${h%/*}"
		bad=1
	fi
	home[$name]=${h%/*}
done < <(find . -name '*.h' -printf '%P\n' | sort)

# every quoted include, as FILE:LINE:TEXT, in one pass
while IFS=: read -r f _ text; do
	[[ $text =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]*)\" ]] ||
		continue
	inc=${BASH_REMATCH[1]}
	from=${f%/*}
	[[ $from == capture/* ]] && from=capture
	allowed=${may_use[$from]:-}
	if [ -z "$allowed" ]; then
		echo "layering: lib/$f: folder $from is in no layer (add it to" \
			"tests/layering.sh and docs/ARCHITECTURE.md)"
		bad=1
		continue
	fi
	name=${inc##*/}
	dir=${home[$name]:-}
	[ -n "$dir" ] || continue # not lib's
	to=$dir
	[[ $to == capture/* ]] && to=capture
	case " ${must_not[$from]:-} " in
	*" $dir/$name "*) ok=no ;;
	*)
		case " $allowed " in
		*" $to "* | *" $dir/$name "*) ok=yes ;;
		*) ok=no ;;
		esac
		;;
	esac
	if [ $ok = no ]; then
		echo "layering: lib/$f includes $inc (lib/$dir):" \
			"$from may use only: $allowed${must_not[$from]:+ (not ${must_not[$from]})}"
		bad=1
	fi
done < <(find . -name '*.[ch]' -printf '%P\n' | sort | xargs grep -n '#[[:space:]]*include')

exit "$bad"
