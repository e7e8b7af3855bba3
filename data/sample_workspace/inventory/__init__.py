"""tinyinv: a tiny inventory tracker."""

from .models import Item, Movement, stock_level

__all__ = ["Item", "Movement", "stock_level"]
