"""The run pages of the admin: the run changelist and the run page (``admin``), and
everything only they use -- the changelist's columns, filters and actions (``columns``,
``filters``, ``search_attributes``, ``confirm``, ``replay_action``), the run page's parts
(``layout``, ``chart``, ``page``, ``times``, ``inlines``) and its repair form (``repair``).
"""
