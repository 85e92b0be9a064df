"""The local stack of ``billing-worker up``: the embedded Redis, the processes it starts, the demo
data it seeds, and the banner it prints."""
