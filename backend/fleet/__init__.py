"""The fleet simulator: N cars, one keyed stream each, produced with murmur2."""
