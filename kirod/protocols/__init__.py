"""Client protocol codecs (pure, sans-IO): decode to the canonical model, encode its events."""
