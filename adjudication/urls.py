from django.urls import path

from adjudication import views

urlpatterns = [
    path("p/<slug:slug>/review/", views.review_home, name="review_home"),
    path("p/<slug:slug>/review/next", views.review_next, name="review_next"),
    path("p/<slug:slug>/review/<int:task_id>/", views.review_task, name="review_task"),
    path("p/<slug:slug>/review/<int:task_id>/draft", views.review_draft, name="review_draft"),
    path("p/<slug:slug>/review/<int:task_id>/decide", views.review_decide, name="review_decide"),
    path("p/<slug:slug>/review/gold/<int:record_id>/revise", views.review_revise, name="review_revise"),
    path("p/<slug:slug>/lexicon/", views.lexicon_page, name="lexicon_page"),
    path("p/<slug:slug>/lexicon.csv", views.lexicon_csv, name="lexicon_csv"),
    path("p/<slug:slug>/items/", views.items_page, name="items_page"),
    path("p/<slug:slug>/items/<int:item_id>/history", views.item_history, name="item_history"),
    path("p/<slug:slug>/items/<int:item_id>/send-back", views.item_send_back, name="item_send_back"),
]
