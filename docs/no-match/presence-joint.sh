#!/usr/bin/env bash
# The presence test's scan with alpha shared by Bonferroni (alpha / 7 per strong weight) or by the
# weights' exact joint chance (MatchRule.presence_joint), on half of the whole catalog: 2,500 and
# 10,000 indexed images, 8,000 and 16,000 calibration scenes (docs/no-match.md, "The scan's joint
# chance, and 16,000 calibration scenes"). Scenes as half-catalog-full.sh, half-catalog-full-10k.sh
# and half-catalog-full-calib-8k.sh draw them (seeds 1, 2, 5, 4), and 8,000 more calibration scenes
# (seed 6). The 2,500 are indexed once and copied before the 7,500 join them; the 8,000 calibration
# scenes likewise before the other 8,000. Tables presence-joint-SIZE-calib-CAL SUFFIX (the grid) and
# presence-bound-joint-SIZE-calib-CAL SUFFIX (presence-bound.py: scans, a perfect test), SIZE half or
# 10k, CAL 8k or 16k. MODEL: any model trained on the whole catalog; HC: where scenes and indexes go.
# GRID=predictive (docs/no-match.md, "A calibration's own chance"): in place of that grid, the joint
# scan at ratio 1.5 with alphas 0.05 to 0.2, the chance count exact and predictive
# (MatchRule.presence_predictive), tables presence-predictive-... SUFFIX, and no presence-bound.py;
# GRID=defaults: the service's defaults alone (the bench's grid defaults), presence-defaults-... SUFFIX.
set -euo pipefail
V="env OMP_WAIT_POLICY=PASSIVE .venv/bin/vsparta"
S=${HC:-.cache/hc-full}/half
MODEL=${MODEL:?a model trained on the whole catalog}
A=$(.venv/bin/python docs/no-match/subgroups.py 0); B=$(.venv/bin/python docs/no-match/subgroups.py 1)
common=(--kind objects --size 224 --heldout-words 0 --heldout-objects 0 --held-word-share 0 --held-object-share 0 --no-vocabulary --no-progress)
scenes() { [ -f $S/$1/test.jsonl ] || $V scenes "${common[@]}" --seed $2 --out $S/$1 --train $3 --val 0 --test $4 --groups "$5"; }
scenes a 1 2000 500 "$A"; scenes b 2 0 500 "$B"; scenes a2 5 0 7500 "$A"
scenes calib8k 4 0 8000 "$A,$B"; scenes calib8kb 6 0 8000 "$A,$B"
.venv/bin/python docs/no-match/renamed-scenes.py "$S" a2 more a2-more.jsonl
.venv/bin/python docs/no-match/renamed-scenes.py "$S" calib8kb cal2 calib8kb-renamed.jsonl
.venv/bin/python -c "import json, sys; print(''.join(json.dumps(dict(r, image='calib8k/' + r['image'])) + '\n'
  for r in map(json.loads, open(sys.argv[1]))), end='')" $S/calib8k/test.jsonl > $S/calib16k.jsonl
cat $S/calib8kb-renamed.jsonl >> $S/calib16k.jsonl
grid=(--presence-quantiles none,0.65 --presence-alphas 0.05,0.1 --presence-ratios 1,1.5 --presence-joints yes,no)
name=presence-joint
[ "${GRID:-}" = predictive ] && name=presence-predictive && grid=(--presence-quantiles 0.65 --presence-ratios 1.5
  --presence-alphas 0.05,0.06,0.07,0.08,0.1,0.16,0.18,0.2 --presence-joints yes --presence-predictives no,yes)
[ "${GRID:-}" = defaults ] && name=presence-defaults && grid=(--presence-quantiles 0.65 --presence-ratios 1.5)
index() { $V index $1 --backend embedded:$S/$2 --model "$MODEL" --resume --failures $S/$2-failures.jsonl --no-progress; }
grow() { [ -d $S/$2 ] || cp -r $S/$1 $S/$2; index $3 $2; }  # a copy of index $1, then manifest $3 into it
index $S/a/train.jsonl index; index $S/a/test.jsonl index; grow index index-10k $S/a2-more.jsonl
index $S/calib8k/test.jsonl calib-index-8k; grow calib-index-8k calib-index-16k $S/calib8kb-renamed.jsonl
for cal in 8k 16k; do
  manifest=$S/calib8k/test.jsonl; calibration=calib8k
  [ $cal = 16k ] && manifest=$S/calib16k.jsonl && calibration=calib16k.jsonl
  for size in half 10k; do
    idx=index; more=(); manifests=()
    [ $size = 10k ] && idx=index-10k && more=(a2-more.jsonl) && manifests=(--index-manifest $S/a2-more.jsonl)
    $V bench no-match-floors --index embedded:$S/$idx --model "$MODEL" --calibration-index embedded:$S/calib-index-$cal \
      --in-split $S/a/test.jsonl --out-split $S/b/test.jsonl --index-manifest $S/a/train.jsonl --index-manifest $S/a/test.jsonl \
      "${manifests[@]}" --calibration-manifest $manifest --positives captions --quantiles 0.5 \
      --negative-quantiles 0.01 --combine mid --min-weights 0.5 --common-shares 0.6 --numbers-match no \
      --function-words-match no "${grid[@]}" \
      --present-floor-scales 0.75 --out-dir docs/no-match --name $name-$size-calib-$cal${SUFFIX:-}
    [ -n "${GRID:-}" ] && continue
    HC=$S INDEX=$idx MORE="${more[*]}" MODEL=$MODEL CALIBRATION=$calibration CALIBRATION_INDEX=calib-index-$cal \
      .venv/bin/python docs/no-match/presence-bound.py > docs/no-match/presence-bound-joint-$size-calib-$cal${SUFFIX:-}.md
  done
done
echo done
