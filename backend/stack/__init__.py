"""The embedded stack as a whole: the Procfile processes, started in order by `up`."""
