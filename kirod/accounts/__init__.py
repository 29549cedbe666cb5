"""The account pool: each account, its health and pacing, its fresh tokens, usage probes, profiles,
conversation affinity, background maintenance and the catalog of models each account offers."""
