"""The two methods: each is the freeze-thaw core with its surrogate, acquisition and fit
schedule."""
