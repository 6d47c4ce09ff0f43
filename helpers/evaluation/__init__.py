"""The evaluation layer: decoding, sacreBLEU BLEU and chrF, baselines, slices, the bootstrap, one metrics layout."""
