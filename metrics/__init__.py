"""Concord's Django-free metrics (SPEC section 3).

Pure functions over plain Python data and numpy arrays. Nothing in this package imports
Django, so outside scripts, Celery workers and researchers' notebooks compute exactly the
numbers the web app shows.

Modules (SPEC section 3 names first, then helpers)
-------
text       normalize, tokens, token_f1, exact_match; token_f1_batch, exact_match_batch, is_absent
entity     canonicalize, f1_rel; f1_rel_batch, Lexicon, TABLE8_PAIRS, TABLE8_LEXICON (Table 8)
boxes      iou, enclosing, enclosing_iou, bipartite_match, set_iou; iou_batch, enclosing_batch,
           enclosing_iou_batch
agreement  cohen_kappa, per_label_kappa, macro_pairwise_kappa, krippendorff_alpha; kappa_ci,
           kappa_from_confusion, confusion_matrix
records    jra, field_scores (paper Eq. 13, Table 1); jra_scores
bootstrap  paired_ci (paper Table 15); mean_ci, bootstrap_means, resample_indices,
           percentile_interval
resample   bootstrap_figures: every figure of a report bootstrapped from one weight matrix as
           weighted sums of per-item contributions (mean, share, kappa, kappa per annotator
           pair, macro kappa over pairs and labels, Krippendorff's alpha); Ratings, LabelRatings
captions   corpus_bleu, sentence_bleu, rouge_l, token_f1_scores, caption_agreement (MemeCap)
checklist  vikr_scores, vikr_summary, success_kappas, leaderboard_spearman (MemeBench VIKR)

Batch forms take Python lists (or numpy arrays) of a million pairs and return float64 arrays
equal, element for element, to the scalar functions; undefined statistics are None, never NaN.

Papers cited in docstrings: "Meme3W" = seeds/harmtrace-meme3w.txt, "AHA" =
seeds/aha-memes.txt, "MemeCap" = seeds/memecap.txt, "MemeBench" = seeds/memebench-vikr.txt.
"""

from __future__ import annotations
