"""The freeze-thaw core shared by both methods. One decision flows one way: a report updates
the :mod:`~syne_dyhpo.core.observations` through the :mod:`~syne_dyhpo.core.trials` life
cycle; at a segment end the :mod:`~syne_dyhpo.core.policy` refits its surrogate, the
:mod:`~syne_dyhpo.core.candidates` are scored by the method's acquisition, and the
:mod:`~syne_dyhpo.core.decision` is carried out by the :mod:`~syne_dyhpo.core.scheduler`."""
