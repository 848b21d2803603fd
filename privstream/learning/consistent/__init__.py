"""Private learning beyond finite classes [B] (Bousquet et al.): one concept per module.

* :mod:`.grid`: the cube partition of a public box and its resolution schedule r = n^{-1/(2d)};
* :mod:`.prf`: per-cell randomness from a secret HMAC-SHA256 key (lazy = dense);
* :mod:`.pcl`: PCL, the pure ε-DP universally Bayes-consistent classifier [B Alg 2];
* :mod:`.metric`: PCL2 on a finite metric space (maximal packing, Voronoi cells) [B Alg 4];
* :mod:`.density`: PCDE, the (ε, δ)-DP histogram density estimator [B Alg 3];
* :mod:`.semisupervised`: the private semi-supervised learner for a VC class [B Thm 4.11];
* :mod:`.audit_specs`: their privacy-audit specs (worst-case pairs and broken variants).
"""
