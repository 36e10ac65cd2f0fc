#!/bin/bash
# The Wikipedia zh–en document corpus (Dobreva et al. 2020; ../shared/data/docsub-zh-en)
# as a corpus directory for recipes/docsub-zh-en.yaml: train as released, and the
# released dev set's 75 articles cut in two at an article's start, the first 38 as
# dev (for tuning), the other 37 as test (for reporting): the paper's test split is
# not released, and whole articles are held out so that no test document is seen.
#   usage: scripts/docsub-zh-en.sh SOURCE_DIR OUT_DIR   (e.g. ../shared/data/docsub-zh-en data/docsub-zh-en)
set -euo pipefail
src=${1:?usage: $0 SOURCE_DIR OUT_DIR}
out=${2:?usage: $0 SOURCE_DIR OUT_DIR}
NMT=${NMT:-nmt}
for split in train dev; do
  $NMT data import "$src/$split.tsv.gz" "$out" --columns doc,section,,src,tgt \
    --src-lang zh --tgt-lang en --split "$split" --force
done
# the line where article 39 starts (1-based): lines before it are dev, the rest test
cut=$(awk 'NR == 1 || $0 != prev { n++; prev = $0 } n == 39 { print NR; exit }' "$out/dev.doc")
for ext in zh en doc section; do
  tail -n +"$cut" "$out/dev.$ext" > "$out/test.$ext.tmp"
  head -n $((cut - 1)) "$out/dev.$ext" > "$out/dev.$ext.tmp"
done
for ext in zh en doc section; do
  mv "$out/dev.$ext.tmp" "$out/dev.$ext"
  mv "$out/test.$ext.tmp" "$out/test.$ext"
done
echo "dev: $(wc -l < "$out/dev.zh") pairs in $(uniq "$out/dev.doc" | wc -l) articles; test: $(wc -l < "$out/test.zh") pairs in $(uniq "$out/test.doc" | wc -l) articles"
