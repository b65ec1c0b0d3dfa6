"""Op registry, sharding rules, propagation and dispatch (the top layer).

Empty for now: the registry arrives with the DArray and dispatch work. It may
import ``dmesh`` and ``collectives``; neither of them imports it at module level.
"""
