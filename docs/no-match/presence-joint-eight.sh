#!/usr/bin/env bash
# presence-joint.sh's grid (Bonferroni or the joint test, alpha 0.05 and 0.1) on the eight-subgroup
# test of half-catalog-full.sh (index: fruit, sweets, flowers, birds; out: mammals, ground transport,
# prepared food, household; 2,500 indexed scenes, seeds 1 and 2) with 2,000 calibration scenes of
# those eight subgroups (seed 3), as there. Tables presence-joint-eight SUFFIX (the grid) and
# presence-bound-joint-eight SUFFIX (presence-bound.py). MODEL and HC as presence-joint.sh (the
# scenes and indexes go to HC/eight).
# GRID=predictive (docs/no-match.md, "A calibration's own chance"): in place of that grid, the
# joint scan at ratio 1.5 with alphas 0.05 to 0.2, the chance count exact and predictive
# (MatchRule.presence_predictive), tables presence-predictive-... SUFFIX, and no presence-bound.py;
# GRID=defaults: the service's defaults alone (the bench's grid defaults), presence-defaults-... SUFFIX.
set -euo pipefail
V="env OMP_WAIT_POLICY=PASSIVE .venv/bin/vsparta"
S=${HC:-.cache/hc-full}/eight
MODEL=${MODEL:?a model trained on the whole catalog}
grid=(--presence-quantiles none,0.65 --presence-alphas 0.05,0.1 --presence-ratios 1,1.5 --presence-joints yes,no)
name=presence-joint
[ "${GRID:-}" = predictive ] && name=presence-predictive && grid=(--presence-quantiles 0.65 --presence-ratios 1.5
  --presence-alphas 0.05,0.06,0.07,0.08,0.1,0.16,0.18,0.2 --presence-joints yes --presence-predictives no,yes)
[ "${GRID:-}" = defaults ] && name=presence-defaults && grid=(--presence-quantiles 0.65 --presence-ratios 1.5)
SPLITS=eight INDEX_ONLY=1 bash docs/no-match/half-catalog-full.sh  # its scenes and indexes
$V bench no-match-floors --index embedded:$S/index --model "$MODEL" --calibration-index embedded:$S/calib-index \
  --in-split $S/a/test.jsonl --out-split $S/b/test.jsonl --index-manifest $S/a/train.jsonl --index-manifest $S/a/test.jsonl \
  --calibration-manifest $S/calib/test.jsonl --positives captions --quantiles 0.5 --negative-quantiles 0.01 \
  --combine mid --min-weights 0.5 --common-shares 0.6 --numbers-match no --function-words-match no \
  --present-floor-scales 0.75 "${grid[@]}" \
  --out-dir docs/no-match --name $name-eight${SUFFIX:-}
[ -n "${GRID:-}" ] && exit 0
HC=$S INDEX=index MORE= MODEL=$MODEL CALIBRATION=calib CALIBRATION_INDEX=calib-index \
  .venv/bin/python docs/no-match/presence-bound.py > docs/no-match/presence-bound-joint-eight${SUFFIX:-}.md
echo done
