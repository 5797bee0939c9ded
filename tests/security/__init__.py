"""Security battery (issue #8): permissions, async tokens, metric labels, CSRF."""
