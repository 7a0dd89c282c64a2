"""The task stores: the contract on every backend, the SQL and Redis stores, the shelve log,
file paths, pools, bounds, outages (blips), the shared log and the keeper."""
