//! PNG plots: latency histograms, time series (occupancy over time) and bar charts
//! (throughput against its reference). Drawn with plotters' bitmap backend.
