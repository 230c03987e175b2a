"""What the node knows of the cluster: topic catalogue and configs, producer state, node identity,
growth hints and fetch waiters."""
